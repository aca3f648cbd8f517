//! The heartbeat monitor (R28): reads the watchdog's heartbeat every
//! `TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC` from its start; unchanged since the last read ⇒ it dumps
//! (the Flight Recorder with the stack traces), sleeps one more heartbeat timeout, and aborts the
//! process. Only a stalled heartbeat (a stuck watchdog, a dump wait longer than the heartbeat
//! timeout, or the main thread's abort of the communicator after a wait's timeout, which the
//! watchdog blocks on) asks for a read. `TORCH_NCCL_ENABLE_MONITORING=0` keeps the monitor
//! running, reading and dumping; it only takes away the abort at the end, which the monitor
//! then logs as the termination it would have done (`HeartbeatMonitor::runLoop`).

use super::{next_tick_ns, wake, Command, Failure, FindingAbout, Wake};
use crate::scenario::GroupId;
use crate::timeline::{ExitStatus, FindingKind, ThreadKind, WatchdogEvent};

impl Failure<'_> {
    /// The watchdog's heartbeat stops moving from `from_ns` until `until_ns` (`u64::MAX`: not
    /// known, or never). The monitor aborts at the first read that finds it unchanged since the
    /// last: asked for as `check`, which is dropped if the stall ended first.
    pub(super) fn heartbeat_stalls(
        &mut self,
        (rank, group): (u32, GroupId),
        from_ns: u64,
        until_ns: u64,
        check: Wake,
        out: &mut Vec<Command>,
    ) {
        let period_ns = self.scenario.env.heartbeat_timeout_ns;
        let read_ns = next_tick_ns(0, period_ns, from_ns + period_ns);
        if read_ns < until_ns {
            wake(out, rank, group, check, read_ns);
        }
    }

    /// The read that found the heartbeat unchanged: a finding, then the monitor leaves its loop
    /// ([`Self::monitor_leaves_loop`]: its dump, its sleep "to verify there is indeed a watchdog
    /// hang", the abort). A non-default group's monitor does not dump: it sets the process's
    /// dump flag (`shouldDump_`, not the store: no other rank sees it), and the default group's
    /// monitor dumps when it reads the flag at its next wake (measured on PyTorch 2.11:
    /// tests/data/torch/probes/subgroup_monitor.txt).
    pub(super) fn heartbeat_abort(
        &mut self,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        // The destructor stopped the monitor once the program returned (R31); a monitor that
        // left its loop reads no more.
        let index = self.index(rank, group);
        if self.heartbeat_stopped(rank) || self.watchdogs[index].monitor_ending.is_some() {
            return;
        }
        let who = self.thread_of(rank, group);
        let seconds = self.scenario.env.heartbeat_timeout_ns / 1_000_000_000;
        let stuck = format!("ProcessGroupNCCL's watchdog got stuck for {seconds} seconds without making progress in monitoring enqueued collectives.");
        if !self.scenario.env.enable_monitoring {
            // The monitor still leaves its loop and dumps; only the abort is switched off, so
            // there is no abort to report, only PyTorch 2.11's log line.
            self.note(
                rank,
                Some(group),
                (
                    ThreadKind::HeartbeatMonitor,
                    WatchdogEvent::HeartbeatTimeout,
                ),
                now_ns,
                format!("{who} {stuck}"),
            );
        } else {
            let message = format!(
                "{who} Heartbeat monitor timed out! Process will be terminated after dumping debug info. {stuck} If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0)."
            );
            self.note(
                rank,
                Some(group),
                (
                    ThreadKind::HeartbeatMonitor,
                    WatchdogEvent::HeartbeatTimeout,
                ),
                now_ns,
                message.clone(),
            );
            out.push(Command::Finding {
                kind: FindingKind::HeartbeatAbort,
                rank,
                about: FindingAbout::Rank,
                message,
            });
        }
        let message = format!("{who} dumping the Flight Recorder and the C++ stacks");
        self.monitor_leaves_loop((rank, group, WATCHDOG_HANG), now_ns, message, out);
        let default_monitor = self.index(rank, 0);
        if group != 0
            && self.scenario.env.dump_on_timeout
            && self.watchdogs[default_monitor].monitor_ending.is_none()
        {
            let seen_ns = next_tick_ns(0, self.scenario.env.coord_check_ns, now_ns + 1);
            wake(out, rank, 0, Wake::DumpFlagSeen, seen_ns);
        }
    }

    /// The monitor left its loop (a stalled heartbeat, or the dump signal in the store): it
    /// dumps the Flight Recorder with the stack traces where this rank has not dumped yet
    /// (`host.watchdog_stack_trace_us`, the dump bounded by `TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC`;
    /// only the default group's monitor dumps, and only under `TORCH_NCCL_DUMP_ON_TIMEOUT`),
    /// sleeps one heartbeat timeout, then terminates the process unless the destructor stopped
    /// it meanwhile (`HeartbeatMonitor::runLoop`; measured on PyTorch 2.11: docs/watchdog.md).
    pub(super) fn monitor_leaves_loop(
        &mut self,
        (rank, group, reason): (u32, GroupId, &'static str),
        now_ns: u64,
        dump_message: String,
        out: &mut Vec<Command>,
    ) {
        let index = self.index(rank, group);
        self.watchdogs[index].monitor_ending = Some(reason);
        let mut dump_ns = 0;
        if group == 0 && self.scenario.env.dump_on_timeout && !self.dumped[rank as usize] {
            self.dumped[rank as usize] = true;
            dump_ns = crate::pg::work::stack_trace_ns(self.scenario)
                .min(self.scenario.env.wait_timeout_dump_ns);
            self.note(
                rank,
                Some(group),
                (ThreadKind::HeartbeatMonitor, WatchdogEvent::Dump),
                now_ns,
                dump_message,
            );
        }
        let kill_ns = now_ns
            .saturating_add(dump_ns)
            .saturating_add(self.scenario.env.heartbeat_timeout_ns);
        wake(out, rank, group, Wake::MonitorKill, kill_ns);
    }

    /// Whose side thread a line is: every group has its own watchdog, and each watchdog starts
    /// its own heartbeat monitor that reads its heartbeat, so beside the default group's the
    /// group is named, as PyTorch's log prefix names it.
    pub(super) fn thread_of(&self, rank: u32, group: GroupId) -> String {
        let rank_id = self.rank_id(rank);
        match group {
            0 => format!("[Rank {rank_id}]"),
            _ => format!(
                "[Rank {rank_id}] [group {}]",
                self.scenario.groups[group].name
            ),
        }
    }

    /// The monitor's sleep after its dump is over: it terminates the process, or, with
    /// `TORCH_NCCL_ENABLE_MONITORING=0`, logs that it would have and ends its thread.
    pub(super) fn monitor_kill(
        &mut self,
        rank: u32,
        group: GroupId,
        now_ns: u64,
        out: &mut Vec<Command>,
    ) {
        let who = self.thread_of(rank, group);
        let seconds = self.scenario.env.heartbeat_timeout_ns / 1_000_000_000;
        let reason =
            (self.watchdogs[self.index(rank, group)].monitor_ending).unwrap_or(WATCHDOG_HANG);
        if !self.scenario.env.enable_monitoring {
            self.note(
                rank,
                Some(group),
                (ThreadKind::HeartbeatMonitor, WatchdogEvent::MonitorDisabled),
                now_ns,
                format!("{who} the heartbeat monitor slept for {seconds} s, then: ProcessGroupNCCL monitor thread is disabled, but would have terminated the process after attempting to dump debug info, due to {reason}."),
            );
            return;
        }
        let message = format!("{who} the heartbeat monitor slept for {seconds} s, then: Terminating the process after attempting to dump debug info, due to {reason}. (std::abort())");
        if reason == DUMP_SIGNAL {
            // A stalled heartbeat had its finding when it was read; the dump signal's end of
            // the process has its own.
            out.push(Command::Finding {
                kind: FindingKind::HeartbeatAbort,
                rank,
                about: FindingAbout::Rank,
                message: format!("{message} The monitor had found the dump signal of a collective timeout or exception in the store and left its loop (R28)."),
            });
        }
        self.take_down(
            (rank, Some(group), ThreadKind::HeartbeatMonitor),
            (ExitStatus::Aborted, now_ns),
            message,
            out,
        );
    }
}

/// Why the monitor left its loop, in PyTorch's words (`exitReason`): a stalled heartbeat.
pub(super) const WATCHDOG_HANG: &str = "ProcessGroupNCCL watchdog hang";
/// ... or the dump signal in the store.
pub(super) const DUMP_SIGNAL: &str = "collective timeout or exception";

#[cfg(test)]
mod tests {
    use super::super::fake::{
        enqueue, finding, per_rank, split, time_out_rank_0, two_ranks, wake, woken, FakeRun,
        DUMP_WAIT_OVER_NS,
    };
    use super::super::FindingAbout;
    use super::super::{Command, Failure, Notice, Wake};
    use crate::scenario::{FaultKind, Scenario};
    use crate::timeline::{ExitStatus, FindingKind, WatchdogEvent};

    /// Rank 0's monitor reading, at 30 s, a heartbeat that did not move (the scenario's
    /// heartbeat timeout 15 s): the component, its fake run and the read's commands.
    fn stalled_read_at_30_s(scenario: &Scenario) -> (Failure<'_>, FakeRun, Vec<Command>) {
        let mut failure = Failure::new(scenario, per_rank(scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        let commands = woken(&mut failure, &run, 0, Wake::HeartbeatCheck, 30_000_000_000);
        (failure, run, commands)
    }

    #[test]
    fn a_stuck_watchdog_is_aborted_at_the_first_read_that_finds_the_heartbeat_unchanged_r28() {
        // The watchdog hangs at its first poll after the 20-µs enqueue (0.1 s); the monitor
        // reads every 480 s: at 480 s the heartbeat moved, at 960 s it did not.
        let scenario = two_ranks("", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        let mut out = Vec::new();
        failure.notify(
            &run,
            Notice::FaultReached {
                rank: 0,
                op: 0,
                iteration: 0,
                fault: FaultKind::WatchdogStuck,
                host_ns: 0,
            },
            &mut out,
        );
        assert_eq!(out, []);
        // The hang is logged at its poll (a process gone by then has no watchdog to hang); the
        // Work's deadline poll was asked for before the watchdog hung, and finds it hung.
        assert_eq!(
            enqueue(&mut failure, &run, (0, 0), 20_000),
            [
                wake(0, Wake::WatchdogHangs, 100_000_000),
                wake(0, Wake::HeartbeatCheck, 960_000_000_000),
                wake(0, Wake::Check, 1_100_000_000),
            ]
        );
        let mut out = Vec::new();
        assert!(failure.is_stale(&run, (0, 0, Wake::Check), 1_100_000_000, &mut out));
        assert_eq!(out, []);
        let (commands, messages) = split(woken(
            &mut failure,
            &run,
            0,
            Wake::HeartbeatCheck,
            960_000_000_000,
        ));
        // It dumps (no stack-trace cost without a profile), sleeps one more heartbeat
        // timeout, then terminates the process (measured on PyTorch 2.11: docs/watchdog.md).
        assert_eq!(
            commands,
            [
                finding(FindingKind::HeartbeatAbort, 0, FindingAbout::Rank),
                wake(0, Wake::MonitorKill, 1_440_000_000_000),
            ]
        );
        assert!(messages[0].contains("got stuck for 480 seconds"));
        let (commands, _) = split(woken(
            &mut failure,
            &run,
            0,
            Wake::MonitorKill,
            1_440_000_000_000,
        ));
        assert_eq!(
            commands,
            [Command::KillProcess {
                rank: 0,
                status: ExitStatus::Aborted,
                at_ns: 1_440_000_000_000,
            }]
        );
    }

    #[test]
    fn a_disabled_monitor_reads_dumps_and_sleeps_but_does_not_terminate_r28() {
        // TORCH_NCCL_ENABLE_MONITORING=0 (HeartbeatMonitor::runLoop): the stalled read leaves
        // the loop as before, the sleep follows, and at its end the monitor only logs the
        // termination it would have done.
        let scenario = two_ranks(
            "[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15\nTORCH_NCCL_ENABLE_MONITORING = 0",
            "",
        );
        let (mut failure, run, commands) = stalled_read_at_30_s(&scenario);
        assert_eq!(commands, [wake(0, Wake::MonitorKill, 45_000_000_000)]);
        let commands = woken(&mut failure, &run, 0, Wake::MonitorKill, 45_000_000_000);
        assert_eq!(commands, []);
        let events: Vec<_> = (failure.into_records().iter())
            .map(|record| (record.event, record.at_ns))
            .collect();
        assert_eq!(
            events,
            [
                (WatchdogEvent::HeartbeatTimeout, 30_000_000_000),
                (WatchdogEvent::Dump, 30_000_000_000),
                (WatchdogEvent::MonitorDisabled, 45_000_000_000),
            ]
        );
    }

    #[test]
    fn the_monitor_s_dump_takes_the_stack_trace_s_time_before_its_sleep_r28() {
        // Measured on PyTorch 2.11 (heartbeat 15 s): the dump took 3.6-5.2 s, then "slept for
        // 15", then the process was terminated. The stack trace costs 4 s here.
        let scenario = two_ranks(
            "[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15\n[host]\nwatchdog_stack_trace_us = 4_000_000",
            "",
        );
        let (mut failure, run, commands) = stalled_read_at_30_s(&scenario);
        assert_eq!(
            commands.last(),
            Some(&wake(0, Wake::MonitorKill, 49_000_000_000))
        );
        // A monitor that left its loop reads no more.
        let again = woken(&mut failure, &run, 0, Wake::HeartbeatCheck, 45_000_000_000);
        assert!(again.is_empty(), "{again:?}");
        // The dump is bounded by the dump timeout (here 1 s); a monitor that does not dump
        // (dumps on timeout off) goes to its sleep at once, and so does one whose recorder is
        // off: no stack trace to symbolise.
        for (env, kill_ns) in [
            ("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = 1000", 46_000_000_000),
            ("TORCH_NCCL_DUMP_ON_TIMEOUT = 0", 45_000_000_000),
            ("TORCH_FR_BUFFER_SIZE = 0", 45_000_000_000),
        ] {
            let scenario = two_ranks(
                &format!("[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 15\n{env}\n[host]\nwatchdog_stack_trace_us = 4_000_000"),
                "",
            );
            let (_, _, commands) = stalled_read_at_30_s(&scenario);
            assert_eq!(
                commands.last(),
                Some(&wake(0, Wake::MonitorKill, kill_ns)),
                "{env}"
            );
        }
    }

    #[test]
    fn a_dump_wait_longer_than_the_heartbeat_timeout_stalls_the_heartbeat_r28() {
        // A 1-s heartbeat timeout: the watchdog stops beating at its 1.1-s timeout poll; the
        // monitor's read at 2 s sees it moved since 1 s, the read at 3 s does not.
        let scenario = two_ranks("[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1", "");
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let run = FakeRun::default().with_work(0, 0, 1);
        enqueue(&mut failure, &run, (0, 0), 20_000);
        let commands = woken(&mut failure, &run, 0, Wake::Check, 1_100_000_000);
        assert_eq!(
            commands.last(),
            Some(&wake(0, Wake::HeartbeatCheck, 3_000_000_000))
        );
        // Without monitoring the monitor reads it and polls the store for dumps all the same
        // (only its abort is off, `HeartbeatMonitor::runLoop`): the same reads are asked for.
        let scenario = two_ranks(
            "[env]\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 1\nTORCH_NCCL_ENABLE_MONITORING = 0",
            "",
        );
        let mut failure = Failure::new(&scenario, per_rank(&scenario));
        let (commands, _) = split(time_out_rank_0(&mut failure, &run));
        assert_eq!(
            commands,
            [
                finding(FindingKind::WatchdogTimeout, 0, FindingAbout::Work(0)),
                wake(0, Wake::DumpSeen, 2_000_000_000),
                wake(1, Wake::DumpSeen, 2_000_000_000),
                wake(0, Wake::DumpWaitOver, DUMP_WAIT_OVER_NS),
                wake(0, Wake::HeartbeatCheck, 3_000_000_000),
            ]
        );
    }
}
