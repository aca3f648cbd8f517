//! `[[fault]]`s as they act at run time, and the R16 mismatch check. Which fault applies
//! where, and what becomes of the op's steps, is [`crate::pg::faults`] (shared with `hw`);
//! here a fault the host reached is logged and acted on: `hang` stops the host, `die` ends
//! the process, and a collective fault (`mismatch`, `async_error`, `watchdog_stuck`) is armed
//! for the rank's next issued collective, whose kernel it acts on, and goes with its Work onto
//! the watchdog's list.
//!
//! Where calls at one SeqNum can disagree (faults, ops restricted to some ranks), each call is
//! compared with the first the engine took; at a disagreement the collective never completes,
//! and once the run ended a finding names every call made there.

use super::{CallVariant, Command, Failure, MismatchFinding, RunView, SeqNumCalls, Signature};
use crate::pg::{faults, work};
use crate::ranks::RankSet;
use crate::scenario::{CollectiveKind, DType, FaultKind, GroupId};
use crate::timeline::{ExitStatus, FindingKind, ThreadKind, WatchdogEvent};

impl Failure<'_> {
    /// `rank`'s host reached `op`, where `fault` applies.
    pub(super) fn fault_reached(
        &mut self,
        (rank, op, iteration): (u32, usize, u32),
        fault: FaultKind,
        host_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let rank_id = self.rank_id(rank);
        let message = faults::fault_reached(
            self.scenario,
            rank_id,
            &fault,
            &self.scenario.ops[op],
            iteration,
        );
        self.note(
            rank,
            None,
            (ThreadKind::Main, WatchdogEvent::Fault),
            host_ns,
            message,
        );
        match fault {
            FaultKind::Hang => out.push(Command::HangHost { rank, op }),
            FaultKind::Die => self.take_down(
                (rank, None, ThreadKind::Main),
                (ExitStatus::Killed, host_ns),
                faults::died(rank_id),
                out,
            ),
            FaultKind::Skip => {}
            armed => self.armed[rank as usize] = Some(armed),
        }
    }

    /// The collective and size `rank` issues for the op it is running (the declared ones, or
    /// those of an armed mismatch fault).
    pub(in crate::engine) fn issued(
        &self,
        rank: u32,
        collective: CollectiveKind,
        size_bytes: u64,
    ) -> (CollectiveKind, u64) {
        match self.armed[rank as usize] {
            Some(FaultKind::Mismatch {
                collective,
                size_bytes,
                ..
            }) => (collective, size_bytes),
            _ => (collective, size_bytes),
        }
    }

    /// An issued collective with the fault armed for it: what a mismatch issued instead,
    /// whether the group's ranks agree on it (R16), and a network that fails under it.
    pub(super) fn check_issued(
        &mut self,
        view: &impl RunView,
        (rank, collective_index, rendezvous): (u32, u32, u32),
        (issued, enqueue_ns): ((CollectiveKind, u64), u64),
        armed: Option<&FaultKind>,
        out: &mut Vec<Command>,
    ) {
        if let Some(FaultKind::Mismatch {
            collective, dtype, ..
        }) = armed
        {
            self.issued_instead
                .insert((rank, collective_index), (*collective, *dtype));
        }
        if self.signatures.is_some() {
            let work = view.work(rank, collective_index);
            let (_, dtype) = self.issued_call(view, rank, collective_index);
            self.check_signature(
                (rank, work.seq_num),
                (work.group, work.seq, work.op, work.iteration),
                (rendezvous, enqueue_ns),
                (issued.0, issued.1, dtype),
                out,
            );
        }
        if let Some(FaultKind::AsyncError { after_ns }) = armed {
            // The network under this collective fails: it never completes, and the
            // communicator reports the error from then on (to a watchdog, if there is one,
            // and to the Work's `is_completed()` and `wait()`).
            out.push(Command::PoisonRendezvous { rendezvous });
            let error_ns = work::async_error_ns(enqueue_ns, *after_ns);
            // An eager world's send or receive runs on the world's communicator (R11).
            let group = self
                .scenario
                .communicator(view.work(rank, collective_index).group);
            (self.errors).work_failed((rank, collective_index), (rank, group), error_ns);
        }
    }

    /// Calls at one SeqNum must issue the same collective, size and element type (R16): a
    /// disagreement with the first call the engine took makes the collective never complete
    /// (NCCL hangs or corrupts); every call is kept for the finding, made once the run ended.
    fn check_signature(
        &mut self,
        (rank, seq_num): (u32, u64),
        (group, seq, op, iteration): (GroupId, u64, usize, u32),
        (rendezvous, host_ns): (u32, u64),
        (collective, size_bytes, dtype): (CollectiveKind, u64, DType),
        out: &mut Vec<Command>,
    ) {
        let Some(signatures) = &mut self.signatures else {
            return;
        };
        let issued = Signature {
            collective,
            size_bytes,
            dtype,
            rank,
            op,
            seq_num,
        };
        let members = self.classes.class_members(rank);
        let earliest = (host_ns, self.classes.rank_of(rank));
        let calls = signatures
            .entry((group, seq))
            .or_insert_with(|| SeqNumCalls {
                first: issued,
                variants: Vec::new(),
            });
        match (calls.variants.iter_mut()).find(|variant| variant.signature.same_call(&issued)) {
            Some(variant) => {
                variant.ranks.union_with(members);
                if earliest < variant.earliest {
                    (variant.signature, variant.earliest) = (issued, earliest);
                    variant.iteration = iteration;
                }
            }
            None => calls.variants.push(CallVariant {
                signature: issued,
                ranks: members.clone(),
                earliest,
                iteration,
            }),
        }
        if !calls.first.agrees_with(&issued) && self.mismatched.insert((group, seq)) {
            out.push(Command::PoisonRendezvous { rendezvous });
        }
    }

    /// The mismatch findings (R16), once the run ended: at each (group, SeqNum) where calls
    /// disagreed, the call most ranks agree with (of equal ones, that of the lowest rank, as
    /// PyTorch's Flight Recorder analysis takes the lowest rank's as the expected) against
    /// each other call, one finding of every rank that made another call. Made at the end, they
    /// name every caller, whichever order the engine took the calls in (hosts run ahead of
    /// the simulation, each to a time of its own, R1).
    pub(in crate::engine) fn mismatch_findings(&self) -> Vec<MismatchFinding> {
        let Some(signatures) = &self.signatures else {
            return Vec::new();
        };
        let mut mismatched: Vec<(GroupId, u64)> = self.mismatched.iter().copied().collect();
        mismatched.sort_unstable();
        let scenario = self.scenario;
        let mut findings = Vec::new();
        for (group, seq) in mismatched {
            let mut variants: Vec<&CallVariant> =
                signatures[&(group, seq)].variants.iter().collect();
            variants.sort_by_key(|variant| variant.ranks.first());
            let agreeing_ranks = |call: &Signature| -> u64 {
                (variants.iter())
                    .filter(|variant| call.agrees_with(&variant.signature))
                    .map(|variant| variant.ranks.count())
                    .sum()
            };
            let expected = *(variants.iter())
                .rev()
                .max_by_key(|variant| agreeing_ranks(&variant.signature))
                .expect("a mismatch has calls");
            let first = expected.signature;
            let (mut agreeing, mut disagreeing): (Vec<&CallVariant>, Vec<&CallVariant>) =
                (variants.iter()).partition(|variant| first.agrees_with(&variant.signature));
            if disagreeing.is_empty() {
                // Agreement is not transitive (a rank's own calls agree whatever their sizes,
                // a send with a receive): the call most agree with may agree with every call
                // though two of them disagree. Each other call is then named apart.
                (agreeing, disagreeing) =
                    (variants.iter()).partition(|variant| variant.signature.same_call(&first));
            }
            let agreeing = (agreeing.iter()).fold(RankSet::default(), |mut ranks, variant| {
                ranks.union_with(&variant.ranks);
                ranks
            });
            let dtypes_differ =
                (disagreeing.iter()).any(|variant| variant.signature.dtype != first.dtype);
            let describe = |s: &Signature, ranks: &RankSet| {
                format!(
                    "{} issued {} of {}{} ({}, line {})",
                    ranks.named(),
                    s.collective.op_type(),
                    crate::units::format_size(s.size_bytes),
                    if dtypes_differ {
                        format!(" {}", s.dtype.as_str())
                    } else {
                        String::new()
                    },
                    scenario.ops[s.op].display_name(),
                    scenario.ops[s.op].line
                )
            };
            // The ranks' Works share a `SeqNum` unless they are point-to-point calls, which
            // each rank numbers among its own.
            let other = disagreeing[0];
            let seq_nums = if first.seq_num == other.signature.seq_num {
                format!("SeqNum={}", first.seq_num)
            } else {
                format!(
                    "SeqNum={} on {}, {} on {}",
                    first.seq_num,
                    expected.ranks.named(),
                    other.signature.seq_num,
                    other.ranks.named()
                )
            };
            let calls: Vec<String> = std::iter::once(describe(&first, &agreeing))
                .chain(
                    (disagreeing.iter())
                        .map(|variant| describe(&variant.signature, &variant.ranks)),
                )
                .collect();
            let message = format!(
                "ranks disagree on collective {seq_nums} of group {}: {}; NCCL would hang or corrupt data, the model hangs it (R16)",
                scenario.groups[group].name,
                calls.join(", "),
            );
            // One finding, of every rank whose call disagrees, at the earliest such call.
            let earliest = (disagreeing.iter())
                .min_by_key(|variant| variant.earliest)
                .expect("a mismatch has a disagreeing call");
            let ranks = (disagreeing.iter()).fold(RankSet::default(), |mut ranks, variant| {
                ranks.union_with(&variant.ranks);
                ranks
            });
            findings.push(MismatchFinding {
                ranks,
                found_ns: earliest.earliest.0,
                iteration: earliest.iteration,
                op: earliest.signature.op,
                message,
            });
        }
        findings
    }

    /// The NCCL async error the program's Work of `rank`'s collective record `collective`
    /// holds, if it stored one ([`Self::program_polled`]): a `wait()` on it raises
    /// ([`work::WorkErrors::stored_error_ns`], R27).
    pub(in crate::engine) fn stored_error_ns(&self, rank: u32, collective: u32) -> Option<u64> {
        self.errors.stored_error_ns((rank, collective))
    }

    /// An `isCompleted()` on the program's Work of `rank`'s collective record `collective` at
    /// `now_ns` (the program's `is_completed()`, a polling wait's poll, a barrier's wait) that
    /// finds `poll_error_ns` ([`Self::poll_error_ns`]): the Work stores the error found by
    /// then, and keeps it ([`work::WorkErrors::program_polled`], R27).
    pub(in crate::engine) fn program_polled(
        &mut self,
        (rank, collective): (u32, u32),
        poll_error_ns: Option<u64>,
        now_ns: u64,
    ) {
        (self.errors).program_polled((rank, collective), poll_error_ns, now_ns);
    }

    /// The NCCL async error a poll of `rank`'s Work of `collective`, on the communicator of
    /// the group `group` gives, finds from its instant on ([`work::WorkErrors::poll_error_ns`],
    /// R27): its own, or its communicator's while that is not aborted.
    pub(in crate::engine) fn poll_error_ns(
        &self,
        rank: u32,
        collective: u32,
        group: impl FnOnce() -> GroupId,
    ) -> Option<u64> {
        self.errors.poll_error_ns(
            (rank, collective),
            || Some((rank, self.scenario.communicator(group()))),
            |(rank, communicator)| self.is_aborted(rank, communicator),
        )
    }

    /// The collective record of the Work the network failed under on `rank`'s communicator of
    /// `group` (its earliest NCCL async error, R27), which the watchdog names; asked only of a
    /// communicator with an error. What a wait raises is its own Work's stored error
    /// ([`Self::stored_error_ns`]).
    pub(super) fn failed_under(&self, rank: u32, group: GroupId) -> u32 {
        let communicator = (rank, self.scenario.communicator(group));
        let (_, collective) = (self.errors.failed_under(communicator))
            .expect("a Work stored an error of its communicator");
        collective
    }

    /// `wait()` (op `op`) on `rank`'s Work of `collective` raises at `host_ns` the NCCL async
    /// error reported at `error_ns` (R27): `DistBackendError`, caught or ending the process.
    pub(super) fn raise_failed(
        &mut self,
        view: &impl RunView,
        (rank, collective, op): (u32, u32, usize),
        (error_ns, host_ns): (u64, u64),
        out: &mut Vec<Command>,
    ) {
        let work = view.work(rank, collective);
        let op_spec = &self.scenario.ops[op];
        let failed = work::async_error_failed(
            self.rank_id(rank),
            &self.work_text(view, rank, collective),
            error_ns,
            op_spec,
        );
        if op_spec.catch {
            out.push(Command::Caught {
                rank,
                op,
                exception: "DistBackendError",
                message: work::failed_work_caught(&failed),
                at_ns: host_ns,
            });
            return;
        }
        let message = work::uncaught(&failed);
        self.raise_uncaught(
            (rank, Some(work.group), op),
            FindingKind::AsyncError,
            (host_ns, message),
            out,
        );
    }

    /// The collective kind and element type of a record as issued (a mismatch fault changes
    /// them; a barrier's is its all_reduce of f32).
    pub(super) fn issued_call(
        &self,
        view: &impl RunView,
        rank: u32,
        collective: u32,
    ) -> (CollectiveKind, DType) {
        if let Some(&issued) = self.issued_instead.get(&(rank, collective)) {
            return issued;
        }
        let kind = &self.scenario.ops[view.work(rank, collective).op].kind;
        (
            kind.collective()
                .map_or(CollectiveKind::AllReduce, |(kind, _)| kind),
            kind.call_dtype(&self.scenario.tensors),
        )
    }

    /// `WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…)` as PyTorch prints
    /// it.
    pub(in crate::engine) fn work_text(
        &self,
        view: &impl RunView,
        rank: u32,
        collective: u32,
    ) -> String {
        let work = view.work(rank, collective);
        let (kind, dtype) = self.issued_call(view, rank, collective);
        crate::pg::work_text(
            self.scenario,
            &self.scenario.ops[work.op],
            (kind, work.bytes, dtype),
            (work.group, work.seq_num),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{
        enqueue, enqueue_issued, enqueue_listed, finding, per_rank, split, two_ranks, wake, woken,
        FakeRun,
    };
    use super::super::FindingAbout;
    use super::super::{Command, Failure, Notice, Wake};
    use crate::ranks::RankSet;
    use crate::scenario::{CollectiveKind, FaultKind};
    use crate::timeline::{ExitStatus, FindingKind};

    fn reached(failure: &mut Failure<'_>, rank: u32, fault: FaultKind) -> Vec<Command> {
        let mut out = Vec::new();
        let notice = Notice::FaultReached {
            rank,
            op: 0,
            iteration: 0,
            fault,
            host_ns: 0,
        };
        failure.notify(&FakeRun::default(), notice, &mut out);
        out
    }

    #[test]
    fn a_hang_stops_the_host_and_a_death_ends_the_process() {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        assert_eq!(
            reached(&mut failure, 1, FaultKind::Hang),
            [Command::HangHost { rank: 1, op: 0 }]
        );
        assert_eq!(
            reached(&mut failure, 0, FaultKind::Die),
            [Command::KillProcess {
                rank: 0,
                status: ExitStatus::Killed,
                at_ns: 0
            }]
        );
        assert_eq!(reached(&mut failure, 0, FaultKind::Skip), []);
    }

    #[test]
    fn a_mismatch_changes_what_is_issued_and_the_disagreement_is_found_once_r16() {
        let faults = "[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\nsize = \"2MiB\"\n";
        let scenario = two_ranks("", faults);
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let fault = scenario.faults[0].kind.clone();
        assert_eq!(reached(&mut failure, 1, fault), []);
        let one_mib = 1 << 20;
        assert_eq!(
            failure.issued(1, CollectiveKind::AllReduce, one_mib),
            (CollectiveKind::AllReduce, 2 << 20)
        );
        assert_eq!(
            failure.issued(0, CollectiveKind::AllReduce, one_mib),
            (CollectiveKind::AllReduce, one_mib)
        );
        let run = FakeRun::default().with_work(0, 0, 1).with_work(1, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let out = enqueue_issued(&mut failure, &run, (1, 0), 20_000, 2 << 20);
        assert_eq!(
            out,
            [
                Command::PoisonRendezvous { rendezvous: 0 },
                wake(1, Wake::Check, 1_100_000_000),
            ]
        );
        // The finding, once the run ended: rank 1's call disagrees with the earliest.
        let found = failure.mismatch_findings();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].ranks, RankSet::range(1, 1));
        assert_eq!(
            (found[0].found_ns, found[0].iteration, found[0].op),
            (20_000, 0, 0)
        );
        assert!(
            found[0].message.contains(
                "SeqNum=1 of group world: rank 0 issued ALLREDUCE of 1MiB (ar, line 9), rank 1 issued ALLREDUCE of 2MiB"
            ),
            "{}",
            found[0].message
        );
        // The fault was used up by that call.
        assert_eq!(
            failure.issued(1, CollectiveKind::AllReduce, one_mib),
            (CollectiveKind::AllReduce, one_mib)
        );
    }

    /// A rank's own calls at one SeqNum agree with each other whatever their sizes (a coalesced
    /// block's), so the relation is not transitive: rank 1's two calls, one of them 3 MiB,
    /// both agree with its 1 MiB one, which most ranks made, while rank 0's 1 MiB call, the
    /// first the engine took, disagrees with the 3 MiB one. The finding still names the
    /// calls apart (it had none to name, and panicked).
    #[test]
    fn a_mismatch_whose_majority_call_agrees_with_every_call_still_names_them_r16() {
        let faults = "[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\nsize = \"3MiB\"\n";
        let scenario = two_ranks("", faults);
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = (FakeRun::default().with_work(0, 0, 1))
            .with_work(1, 0, 1)
            .with_work(1, 1, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        enqueue(&mut failure, &run, (1, 0), 10_000);
        let out = enqueue_issued(&mut failure, &run, (1, 1), 10_000, 3 << 20);
        assert!(
            out.contains(&Command::PoisonRendezvous { rendezvous: 1 }),
            "{out:?}"
        );
        let found = failure.mismatch_findings();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].ranks, RankSet::range(1, 1));
        assert!(
            found[0].message.contains(
                "ranks 0-1 (2 ranks) issued ALLREDUCE of 1MiB (ar, line 9), rank 1 issued ALLREDUCE of 3MiB"
            ),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn a_stuck_watchdog_fault_under_blocking_wait_says_no_watchdog_runs_r15() {
        for (env, hangs) in [("", true), ("[env]\nTORCH_NCCL_BLOCKING_WAIT = 1", false)] {
            let scenario = two_ranks(env, "");
            let mut failure = Failure::new(&scenario, per_rank(&scenario));
            assert_eq!(reached(&mut failure, 0, FaultKind::WatchdogStuck), []);
            let message = &failure.records[0].message;
            assert_eq!(
                message.starts_with("[Rank 0] fault: the watchdog hangs in cudaEventQuery"),
                hangs,
                "{message}"
            );
            assert_eq!(
                message.contains("starts no watchdog (R15): the fault has no effect"),
                !hangs,
                "{message}"
            );
        }
    }

    #[test]
    fn an_async_error_of_a_work_listed_late_is_caught_at_the_first_poll_after_the_listing_r26() {
        // The error at 0.5 s, the Work listed at 2.05 s (its call blocked behind a full launch
        // queue): the 2.1-s poll is the first with the Work on the list.
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        let fault = FaultKind::AsyncError {
            after_ns: 500_000_000,
        };
        reached(&mut failure, 0, fault);
        let commands = enqueue_listed(&mut failure, &run, (0, 0), (20_000, 2_050_000_000));
        let caught = wake(0, Wake::AsyncError { collective: 0 }, 2_100_000_000);
        assert!(commands.contains(&caught), "{commands:?}");
    }

    #[test]
    fn an_async_error_poisons_its_collective_and_is_caught_at_the_next_poll_r26() {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        reached(
            &mut failure,
            0,
            FaultKind::AsyncError {
                after_ns: 500_000_000,
            },
        );
        assert_eq!(
            enqueue(&mut failure, &run, (0, 0), 20_000),
            [
                Command::PoisonRendezvous { rendezvous: 0 },
                wake(0, Wake::AsyncError { collective: 0 }, 600_000_000),
                wake(0, Wake::Check, 1_100_000_000),
            ]
        );
        let (commands, _) = split(woken(
            &mut failure,
            &run,
            0,
            Wake::AsyncError { collective: 0 },
            600_000_000,
        ));
        assert_eq!(
            commands[0],
            finding(FindingKind::AsyncError, 0, FindingAbout::Work(0))
        );
        // While the error is handled, the deadline poll is stale.
        assert_eq!(woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000), []);
    }

    #[test]
    fn a_work_failed_by_an_async_error_fails_from_the_error_on_r27() {
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        reached(
            &mut failure,
            0,
            FaultKind::AsyncError {
                after_ns: 500_000_000,
            },
        );
        enqueue(&mut failure, &run, (0, 0), 20_000);
        assert_eq!(failure.poll_error_ns(0, 0, || 0), Some(500_020_000));
        // A Work without an error never fails.
        assert_eq!(failure.poll_error_ns(1, 0, || 0), None);
        // The program's Work stores the error only from a poll at or after it, and keeps it.
        failure.program_polled((0, 0), Some(500_020_000), 500_019_999);
        assert_eq!(failure.stored_error_ns(0, 0), None);
        failure.program_polled((0, 0), Some(500_020_000), 500_020_000);
        failure.program_polled((0, 0), None, 600_000_000);
        assert_eq!(failure.stored_error_ns(0, 0), Some(500_020_000));
    }
}
