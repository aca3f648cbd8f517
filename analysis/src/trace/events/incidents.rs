//! What went wrong, as instants on the trace: data races, the watchdog's steps and the
//! findings, each at the time it happened (a finding's time is derived: the Timeline does not
//! record it).

use super::*;

impl TraceContext<'_> {
    pub(super) fn races(&self, rank: &RankTimeline, sink: &mut Sink) -> io::Result<()> {
        let ops = &self.timeline.ops;
        for race in &rank.races {
            let tid = rank
                .streams
                .iter()
                .position(|s| s.name == race.later_stream)
                .map_or(HOST_TID, |index| stream_tid(index as u16));
            sink.instant(
                "race",
                &format!("data race on {}", race.tensor),
                (pid(rank.rank), tid),
                race.host_ns,
                json!({"earlier_op": ops[race.earlier_op as usize].name,
                    "earlier_stream": race.earlier_stream,
                    "later_op": ops[race.later_op as usize].name,
                    "later_stream": race.later_stream, "iteration": race.iteration}),
            )?;
        }
        Ok(())
    }

    /// The watchdog's, the heartbeat monitor's and the main thread's steps (R26–R29), and the
    /// watchdog's sleep for the dumps (R27).
    pub(super) fn watchdog(&self, rank: u32, sink: &mut Sink) -> io::Result<()> {
        let pid = pid(rank);
        let records = &self.timeline.watchdog;
        let mut named_threads = Vec::new();
        for record in records.iter().filter(|r| r.concerns(rank)) {
            let group = usize::from(record.group.unwrap_or(0));
            let (tid, thread) = match record.thread {
                ThreadKind::Main => (HOST_TID, "main"),
                ThreadKind::Watchdog => (1000 + 2 * group as u64, "pt_nccl_watchdg"),
                ThreadKind::HeartbeatMonitor => (1001 + 2 * group as u64, "pt_nccl_heartbt"),
            };
            if tid != HOST_TID && !named_threads.contains(&tid) {
                named_threads.push(tid);
                let group_name = self
                    .timeline
                    .scenario
                    .groups
                    .get(group)
                    .map_or("?", String::as_str);
                sink.metadata(
                    "thread_name",
                    pid,
                    tid,
                    json!({"name": format!("{thread} (group {group_name})")}),
                )?;
            }
            sink.instant(
                "watchdog",
                &record.event.to_string(),
                (pid, tid),
                record.at_ns,
                json!({"message": as_logged_by(
                    &record.message,
                    record.rank,
                    &record.stands_for,
                    rank
                )}),
            )?;
            let acted = records.iter().find(|r| {
                (r.group, r.thread) == (record.group, record.thread)
                    && r.concerns(rank)
                    && r.at_ns > record.at_ns
                    && matches!(
                        r.event,
                        WatchdogEvent::NoHandling | WatchdogEvent::Abort | WatchdogEvent::Exit
                    )
            });
            if let (WatchdogEvent::DumpSignal, Some(acted)) = (record.event, acted) {
                sink.slice(
                    "watchdog",
                    "dump wait (4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC)",
                    (pid, tid),
                    record.at_ns,
                    acted.at_ns,
                    json!({}),
                )?;
            }
        }
        Ok(())
    }

    /// `finding` on the process `pid`: where it stands for several ranks and `pid` is one
    /// of theirs, with that rank's own text.
    pub(super) fn finding(&self, finding: &Finding, pid: u64, sink: &mut Sink) -> io::Result<()> {
        let rank = (pid - 1) as u32;
        let own;
        let finding = if finding.rank != Some(rank) && finding.stands_for.contains(rank) {
            own = finding.narrowed_to(RankSet::range(rank, rank));
            &own
        } else {
            finding
        };
        sink.event(&json!({"ph": "i", "s": "g", "cat": "finding",
            "name": finding.kind.as_str(), "pid": pid, "tid": HOST_TID,
            "ts": sink.time(finding_time_ns(self.timeline, finding)),
            "args": {"message": finding.message, "iteration": finding.iteration}}))
    }
}

/// `message`, logged by `rank` for every rank of `stands_for` too (a record made once for ranks
/// that behave alike), as `member`, one of them, logged it: the rank that closes its opening
/// bracket (`[Rank r]`, PyTorch's `[PG ID 0 PG GUID 0(default_pg) Rank r]`) is `member`, and
/// where it names the process-group ranks of all (a store timeout's `[1-3]`), it names
/// `member`'s own — as `Timeline::expand` rewrites a class's exceptions.
pub(super) fn as_logged_by(message: &str, rank: u32, stands_for: &RankSet, member: u32) -> String {
    let mut message = message.to_string();
    if member == rank || !stands_for.contains(member) {
        return message;
    }
    if let Some((span, named)) = group_ranks_in(&message) {
        let index = stands_for.iter().position(|r| r == member);
        let own = index.and_then(|index| named.iter().nth(index));
        if let (Some(own), true) = (own, named.count() == stands_for.count()) {
            message.replace_range(span, &own.to_string());
        }
    }
    let opening = message
        .starts_with('[')
        .then(|| message.find(']'))
        .flatten();
    let named_rank = format!("Rank {rank}");
    match opening {
        Some(end) if message[..end].ends_with(&named_rank) => {
            let start = end - named_rank.len();
            message.replace_range(start..end, &format!("Rank {member}"));
            message
        }
        _ => message,
    }
}

/// When a finding happened, which the Timeline does not record: the time of the watchdog step
/// that reported it (a timeout, an async error, a heartbeat or store timeout), else the start of
/// the host call it names (rank, iteration and op: a race, a mismatch), else the last time its
/// rank (or, without a rank, any rank) recorded anything — where a deadlock or a cap stopped it.
fn finding_time_ns(timeline: &Timeline, finding: &Finding) -> u64 {
    let reported_by = match finding.kind {
        FindingKind::WatchdogTimeout => Some(WatchdogEvent::Timeout),
        FindingKind::AsyncError => Some(WatchdogEvent::AsyncError),
        FindingKind::HeartbeatAbort => Some(WatchdogEvent::HeartbeatTimeout),
        FindingKind::StoreTimeout => Some(WatchdogEvent::StoreTimeout),
        FindingKind::WaitTimeout => Some(WatchdogEvent::WaitTimeout),
        _ => None,
    };
    // A failure at exit (R31) is logged with its finding's own message.
    if finding.kind == FindingKind::ExitFailure {
        if let Some(record) = (timeline.watchdog.iter()).find(|r| {
            finding.rank.is_some_and(|rank| r.concerns(rank)) && r.message == finding.message
        }) {
            return record.at_ns;
        }
    }
    if let Some(event) = reported_by {
        if let Some(record) = timeline
            .watchdog
            .iter()
            .find(|r| finding.rank.is_some_and(|rank| r.concerns(rank)) && r.event == event)
        {
            return record.at_ns;
        }
    }
    let rank = finding.rank.and_then(|rank| {
        (timeline.ranks.iter()).find(|r| r.rank == rank || r.stands_for.contains(rank))
    });
    if let (Some(rank), Some(op), Some(iteration)) = (rank, finding.op, finding.iteration) {
        if let Some(call) = rank
            .host
            .iter()
            .find(|call| call.op == op && call.iteration == iteration)
        {
            return call.start_ns;
        }
    }
    match rank {
        Some(rank) => last_recorded_ns(timeline, rank),
        // A rank the Timeline does not hold (a summarised run keeps few): the last step any
        // rank's watchdog logged, which a summarised Timeline keeps whole.
        None => (timeline.ranks.iter())
            .map(|rank| last_recorded_ns(timeline, rank))
            .chain(timeline.watchdog.iter().map(|r| r.at_ns))
            .max()
            .unwrap_or(0),
    }
}

/// The last time `rank` recorded anything: a call's or a kernel's end, a watchdog step.
pub(super) fn last_recorded_ns(timeline: &Timeline, rank: &RankTimeline) -> u64 {
    let host = rank.host.iter().map(|call| call.end_ns);
    let kernels = rank.kernels.iter().map(|kernel| kernel.end_ns);
    let steps = timeline
        .watchdog
        .iter()
        .filter(|r| r.concerns(rank.rank))
        .map(|r| r.at_ns);
    let unfinished = rank.unfinished_host.map(|call| call.start_ns);
    host.chain(kernels)
        .chain(steps)
        .chain(unfinished)
        .max()
        .unwrap_or(0)
}
