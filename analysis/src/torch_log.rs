//! PyTorch's own error-path log lines (`[rank0]:[E1201 03:54:42.518274455
//! ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: …`) turned
//! into Timeline watchdog records: what the watchdog and the main thread's C++ did in a
//! `c10dsim torch` run, which the Python interpreter cannot see (docs/torch.md), and the call
//! that made the Work such a line names ([`work_call`]). Pure: text and Timeline in, records
//! out.
//!
//! Two readings need more than a phrase table:
//! - **The clock.** PyTorch 2.11's C++ logger prints the wall clock's seconds with the
//!   nanoseconds of `CLOCK_MONOTONIC`, so the printed fraction is off by a constant that changes
//!   with each boot (seen on the H200s: 0.026 s, 0.587 s, 0.80–0.86 s). With the run's origin on both clocks
//!   ([`LogOrigin::monotonic_ns`]) the true time is exact; without it, a line may be up to 1 s
//!   off.
//! - **Who logged it.** A wait's own timeout (blocking wait, `wait(timeout)`) goes through the
//!   same timeout check as the watchdog's, so its first line says "Watchdog caught collective
//!   operation timeout" although the main thread printed it; the line after it, "timed out in
//!   blocking wait", says whose it was, and both are the main thread's records, as the simulator
//!   and `hw` log them. The main thread then aborts the communicator and prints
//!   "taking the entire process down" before it rethrows to Python, where the program may catch
//!   it: that line is the abort's end, not the process's.
//! - **Which group's Work.** The timeout and async-error lines name the Work
//!   (`WorkNCCL(SeqNum=…, OpType=…)`) but no process group; the line the group's own watchdog
//!   prints next ("failure detected by watchdog at work sequence id: N") opens with the group's
//!   prefix (`[PG ID 1 PG GUID 1(pair) Rank 0]`), which says whose Work it was ([`LoggedGroup`]).
//!
//! Its tests, half of them on measured log lines, are in `torch_log/tests.rs`.

use std::collections::BTreeSet;

use sim::collective::CollectiveKind;
use sim::timeline::{
    Finding, FindingKind, OpRef, ThreadKind, Timeline, WatchdogEvent, WatchdogRecord,
};

/// Which log lines become which records, by a phrase of the message.
const EVENTS: [(&str, ThreadKind, WatchdogEvent); 14] = [
    (
        "Watchdog caught collective operation timeout",
        ThreadKind::Watchdog,
        WatchdogEvent::Timeout,
    ),
    (
        "raised the following async exception",
        ThreadKind::Watchdog,
        WatchdogEvent::AsyncError,
    ),
    (
        "Stack trace of the failed collective",
        ThreadKind::Watchdog,
        WatchdogEvent::StackTrace,
    ),
    (
        "to signal dumping",
        ThreadKind::Watchdog,
        WatchdogEvent::DumpSignal,
    ),
    (DUMPING, ThreadKind::Watchdog, WatchdogEvent::Dump),
    (
        "taking the entire process down",
        ThreadKind::Watchdog,
        WatchdogEvent::Exit,
    ),
    (
        "Heartbeat monitor timed out",
        ThreadKind::HeartbeatMonitor,
        WatchdogEvent::HeartbeatTimeout,
    ),
    // PyTorch 2.11's monitor, when it leaves its loop on a stalled heartbeat (R28).
    (
        STALLED_HEARTBEAT,
        ThreadKind::HeartbeatMonitor,
        WatchdogEvent::HeartbeatTimeout,
    ),
    // ... and when it ends the process, after its dump and one heartbeat timeout's sleep.
    (
        "Terminating the process after attempting to dump debug info",
        ThreadKind::HeartbeatMonitor,
        WatchdogEvent::Exit,
    ),
    // ... or, under TORCH_NCCL_ENABLE_MONITORING=0, says it would have and lets it live.
    (
        "monitor thread is disabled, but would have terminated the process",
        ThreadKind::HeartbeatMonitor,
        WatchdogEvent::MonitorDisabled,
    ),
    // After the program returned without destroy_process_group() (R31): the watchdog's
    // exception once the destructor tore the group down, and the destructor's abort timing out.
    (
        "terminated with exception: std::future_error",
        ThreadKind::Watchdog,
        WatchdogEvent::Exit,
    ),
    (
        "Future for ProcessGroup abort timed out",
        ThreadKind::Main,
        WatchdogEvent::Abort,
    ),
    // The watchdog's `checkAndSetRemoteError` (TORCH_NCCL_PROPAGATE_ERROR=1, R27): another
    // rank's error, read from the store.
    (
        "remote error detected from rank: ",
        ThreadKind::Watchdog,
        WatchdogEvent::RemoteError,
    ),
    // The main thread's warning at an unbatched send or receive on an eager group (R11).
    (
        "An unbatched P2P op (send/recv) was called on this ProcessGroup",
        ThreadKind::Main,
        WatchdogEvent::Warning,
    ),
];

/// What `TORCH_WARN` prints before a warning's message (the eager P2P one's group prefix
/// follows it); a record keeps the message without it, as the simulator writes it.
const WARNING: &str = "Warning: ";

/// The main thread's line after the shared timeout check: the timeout was a wait's own.
const WAIT_TIMED_OUT: &str = "timed out in blocking wait";

/// The heartbeat monitor leaves its loop with one of these lines (its `errorMsg`): a stalled
/// heartbeat, or the dump signal found in the store. The dump after it is the monitor's.
const STALLED_HEARTBEAT: &str = "watchdog got stuck for";
const DUMP_SIGNAL_READ: &str = "Received a dump signal due to";
const DUMPING: &str = "preparing to dump debug info";

/// A group's watchdog, right after it caught a timeout or an async error on one of the group's
/// Works, names the Work's `SeqNum` after its group's prefix (PyTorch 2.11's
/// `ProcessGroupNCCL.cpp:2303`).
const FAILURE_DETECTED: &str = "failure detected by watchdog at work sequence id: ";

/// The process group a ProcessGroupNCCL line opens with, as PyTorch's `createLogPrefix` prints
/// it: `[PG ID 0 PG GUID 0(default_pg) Rank 0] `, or without the parenthesis where the group's
/// description is empty or `undefined` (`[PG ID 1 PG GUID 1 Rank 0] `).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedGroup<'a> {
    /// The group's number among the process's own groups, in the order it created them.
    pub local_id: u32,
    /// The group's name, the same on every rank: `0` for the default group, then PyTorch's
    /// count of `new_group` calls (or a hash of the ranks, for a locally synchronised group).
    pub guid: &'a str,
    /// `group_desc`: `default_pg` for the default group, what `new_group(group_desc=…)` was
    /// given for another (`c10dsim torch`'s interpreter gives the scenario's name); `None` where
    /// PyTorch printed none.
    pub desc: Option<&'a str>,
    /// The rank within the group.
    pub group_rank: u32,
}

/// The group prefix `message` opens with, if it opens with one.
pub fn logged_group(message: &str) -> Option<LoggedGroup<'_>> {
    let rest = message.strip_prefix("[PG ID ")?;
    let (local_id, rest) = rest.split_once(" PG GUID ")?;
    let local_id = local_id.parse().ok()?;
    // The prefix ends at the first `]` that closes ` Rank N`: a description may hold a `]`
    // of its own.
    let ends = rest.match_indices(']').map(|(end, _)| end);
    let (head, group_rank) = ends
        .filter_map(|end| {
            let (head, group_rank) = rest[..end].rsplit_once(" Rank ")?;
            let group_rank: u32 = group_rank.parse().ok()?;
            Some((head, group_rank))
        })
        .next()?;
    let (guid, desc) = match head.split_once('(') {
        Some((guid, desc)) => (guid, Some(desc.strip_suffix(')')?)),
        None => (head, None),
    };
    if guid.is_empty() || guid.contains(' ') {
        return None;
    }
    Some(LoggedGroup {
        local_id,
        guid,
        desc,
        group_rank,
    })
}

impl LoggedGroup<'_> {
    /// The scenario group it is, as an index into `groups` (the Timeline's `scenario.groups`,
    /// the world first): the default group (GUID `0`, the first PyTorch creates) is the world;
    /// another is the group its description names. `None` where it names none: a run whose
    /// interpreter gave PyTorch no description (until 2026-12-07), or another program's log.
    pub fn index(&self, groups: &[String]) -> Option<u16> {
        if self.guid == "0" {
            return (!groups.is_empty()).then_some(0);
        }
        let desc = self.desc?;
        let index = groups.iter().skip(1).position(|name| name == desc)? + 1;
        u16::try_from(index).ok()
    }
}

/// Time 0 of a run on the two clocks PyTorch's log lines mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOrigin {
    /// The wall clock at time 0, Unix ns (the Timeline's `host_origin_unix_ns`).
    pub unix_ns: u64,
    /// `CLOCK_MONOTONIC` at the same moment (`host_origin_monotonic_ns`); `None` for a Timeline
    /// written before the torch engine kept it: the printed clock is then read as wall time.
    pub monotonic_ns: Option<u64>,
}

impl LogOrigin {
    /// A line's wall time from its printed whole seconds (Unix ns) and printed fraction.
    fn unix_ns(&self, whole_seconds_ns: u64, fraction_ns: u64) -> Option<u64> {
        const SECOND_NS: i128 = 1_000_000_000;
        let fraction = match self.monotonic_ns {
            // The fraction is the monotonic clock's; the wall clock is ahead of it by the
            // origin's difference, and within the printed second.
            Some(monotonic_ns) => {
                let offset = i128::from(self.unix_ns) - i128::from(monotonic_ns);
                (i128::from(fraction_ns) + offset).rem_euclid(SECOND_NS)
            }
            None => i128::from(fraction_ns),
        };
        u64::try_from(i128::from(whole_seconds_ns) + fraction).ok()
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The year of a Unix time (the log lines carry month and day only).
fn year_of(unix_ns: u64) -> i64 {
    let days = (unix_ns / 1_000_000_000 / 86_400) as i64;
    let mut year = 1970 + days / 365;
    while days_from_civil(year, 1, 1) > days {
        year -= 1;
    }
    while days_from_civil(year + 1, 1, 1) <= days {
        year += 1;
    }
    year
}

/// One of PyTorch's log lines: its rank, printed clock and message.
#[derive(Debug, PartialEq)]
struct Line<'a> {
    rank: u32,
    /// The printed date and time to the second, as Unix ns (the clock is read as UTC).
    whole_seconds_ns: u64,
    /// The printed nanoseconds.
    fraction_ns: u64,
    message: &'a str,
}

/// `[rank0]:[E1201 03:54:42.518274455 File.cpp:1] message` → its [`Line`].
fn parse_line(line: &str, year: i64) -> Option<Line<'_>> {
    let rest = line.strip_prefix("[rank")?;
    let (rank, rest) = rest.split_once("]:[")?;
    let rank: u32 = rank.parse().ok()?;
    let (header, message) = rest.split_once("] ")?;
    let mut fields = header.split(' ');
    // The severity letter, then month × 100 + day, unpadded (c10's MessageLogger prints
    // `(tm_mon + 1) * 100 + tm_mday`): `E915` on 15 September, `E1201` on 1 December.
    let date = fields.next()?.get(1..)?;
    let time = fields.next()?;
    if !(3..=4).contains(&date.len()) || !date.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (month, day) = date.split_at(date.len() - 2);
    let month: i64 = month.parse().ok()?;
    let day: i64 = day.parse().ok()?;
    let (clock, fraction) = time.split_once('.')?;
    let mut parts = clock.split(':').map(|part| part.parse::<i64>().ok());
    let (hour, minute, second) = (parts.next()??, parts.next()??, parts.next()??);
    // A clock PyTorch could print (a leap second included); anything else is not its line,
    // and the arithmetic below stays in range.
    let in_range = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..=60).contains(&second);
    if !in_range {
        return None;
    }
    let nanos: i64 = format!("{fraction:0<9}").get(0..9)?.parse().ok()?;
    if nanos < 0 {
        return None;
    }
    // In i128: a year late in u64's nanosecond range (2554) overflows i64 nanoseconds.
    let seconds = i128::from(days_from_civil(year, month, day)) * 86_400
        + i128::from(hour * 3600 + minute * 60 + second);
    let whole_seconds_ns = u64::try_from(seconds * 1_000_000_000).ok()?;
    Some(Line {
        rank,
        whole_seconds_ns,
        fraction_ns: nanos as u64,
        message: message.trim(),
    })
}

/// A line of a run that began at `origin_unix_ns`, dated in the origin's year, or in the next
/// one where that puts it nearer: a run started on 31 December prints January's lines as
/// `E101`, which the origin's year would put a year before the run.
fn parse_line_of_run(text: &str, year: i64, origin_unix_ns: u64) -> Option<Line<'_>> {
    const HALF_A_YEAR_NS: u64 = 183 * 86_400 * 1_000_000_000;
    let line = parse_line(text, year)?;
    if line.whole_seconds_ns.saturating_add(HALF_A_YEAR_NS) < origin_unix_ns {
        return parse_line(text, year + 1);
    }
    Some(line)
}

/// The watchdog and main-thread records in `log` (PyTorch's stderr of a launch), on the axis
/// whose time 0 is `origin`; lines before the origin, or of another kind, are skipped. A
/// record of a group's watchdog or heartbeat monitor names its group where the line's prefix
/// says which of `groups` (the Timeline's `scenario.groups`) it is ([`LoggedGroup::index`]); a
/// timeout or async error, whose line has no prefix, takes the group of the line its watchdog
/// prints next about the same `SeqNum`.
pub fn watchdog_records(log: &str, origin: LogOrigin, groups: &[String]) -> Vec<WatchdogRecord> {
    let year = year_of(origin.unix_ns);
    let mut records: Vec<WatchdogRecord> = Vec::new();
    // Timeout and async-error records a group's "failure detected" line has claimed.
    let mut claimed: BTreeSet<usize> = BTreeSet::new();
    // Ranks whose main thread timed a wait out and has not yet printed its abort's end.
    let mut raising: BTreeSet<u32> = BTreeSet::new();
    // Ranks whose heartbeat monitor left its loop and has not yet printed its dump.
    let mut monitor_dumping: BTreeSet<u32> = BTreeSet::new();
    for text in log.lines() {
        let Some(line) = parse_line_of_run(text, year, origin.unix_ns) else {
            continue;
        };
        let rank = line.rank;
        let message = line.message.strip_prefix(WARNING).unwrap_or(line.message);
        let group = logged_group(message).and_then(|group| group.index(groups));
        if let Some(seq_num) = message
            .split_once(FAILURE_DETECTED)
            .and_then(|(_, rest)| rest.split(' ').next()?.parse::<u64>().ok())
        {
            // The earliest watchdog timeout or async error of the rank, not yet claimed, whose
            // Work has this SeqNum: another group's watchdog may have logged in between.
            let caught = (0..records.len()).find(|&index| {
                let r = &records[index];
                r.rank == rank
                    && r.thread == ThreadKind::Watchdog
                    && matches!(r.event, WatchdogEvent::Timeout | WatchdogEvent::AsyncError)
                    && !claimed.contains(&index)
                    && logged_work(&r.message).is_some_and(|work| work.seq_num == seq_num)
            });
            if let Some(index) = caught {
                claimed.insert(index);
                records[index].group = group;
            }
            continue;
        }
        // The watchdog thread's exception repeats the timeout's message: one record is enough
        // (a broken promise at exit says something of its own).
        if message.contains("terminated with exception") && !message.contains("std::future_error") {
            continue;
        }
        // A line before the origin (or out of range) is skipped before it changes anything.
        let Some(at_ns) = origin
            .unix_ns(line.whole_seconds_ns, line.fraction_ns)
            .and_then(|unix_ns| unix_ns.checked_sub(origin.unix_ns))
        else {
            continue;
        };
        let mut abort_ended = false;
        if message.contains(STALLED_HEARTBEAT) || message.contains(DUMP_SIGNAL_READ) {
            monitor_dumping.insert(rank);
        }
        let kind = if message.contains(DUMPING) && monitor_dumping.remove(&rank) {
            Some((ThreadKind::HeartbeatMonitor, WatchdogEvent::Dump))
        } else if message.contains(WAIT_TIMED_OUT) {
            // The timeout line just before it was this wait's, printed by the main thread.
            if let Some(previous) = records.iter_mut().rfind(|r| r.rank == rank) {
                if previous.event == WatchdogEvent::Timeout
                    && work_named(&previous.message).is_some()
                    && work_named(&previous.message) == work_named(message)
                {
                    previous.thread = ThreadKind::Main;
                    previous.event = WatchdogEvent::WaitTimeout;
                    previous.group = None;
                }
            }
            raising.insert(rank);
            Some((ThreadKind::Main, WatchdogEvent::WaitTimeout))
        } else if message.contains("taking the entire process down") && raising.remove(&rank) {
            // The main thread's abort ended; it rethrows to the program. (The line names no
            // Work: a second group's watchdog taking the process down in that window would be
            // read as this abort's end.)
            abort_ended = true;
            Some((ThreadKind::Main, WatchdogEvent::Abort))
        } else {
            EVENTS
                .iter()
                .find(|(phrase, _, _)| message.contains(phrase))
                .map(|(_, thread, event)| (*thread, *event))
        };
        let Some((thread, event)) = kind else {
            continue;
        };
        records.push(WatchdogRecord {
            stands_for: Default::default(),
            rank,
            // The main thread's lines are no group's, but for a group's own warning.
            group: group.filter(|_| thread != ThreadKind::Main || event == WatchdogEvent::Warning),
            thread,
            event,
            at_ns,
            message: if abort_ended {
                format!(
                    "[Rank {rank}] the main thread's abort of the communicator ended and the wait raises to the program (PyTorch's line: {message})"
                )
            } else {
                message.to_string()
            },
        });
    }
    records
}

/// The Work a line names, `WorkNCCL(SeqNum=1, …)`.
fn work_named(message: &str) -> Option<&str> {
    let start = message.find("WorkNCCL(")?;
    let end = start + message[start..].find(')')?;
    Some(&message[start..=end])
}

/// The Work a line names by its `SeqNum` and `OpType` (`WorkNCCL(SeqNum=3, OpType=ALLREDUCE, …)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedWork<'a> {
    pub seq_num: u64,
    /// PyTorch's `OpType` (`ALLREDUCE`, `SEND`, `COALESCED`); `None` where the line has none.
    pub op_type: Option<&'a str>,
}

/// The Work a line names, if it names one with a `SeqNum`.
pub fn logged_work(message: &str) -> Option<LoggedWork<'_>> {
    let work = work_named(message)?;
    let fields = work.strip_prefix("WorkNCCL(")?.strip_suffix(')')?;
    let field = |name: &str| {
        fields
            .split(", ")
            .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
    };
    Some(LoggedWork {
        seq_num: field("SeqNum")?.parse().ok()?,
        op_type: field("OpType"),
    })
}

/// The call that made the Work a log line of `rank` names, as the simulator's finding about a
/// Work names it (docs/timeline-format.md): the iteration and op of the rank's collective
/// record, completed or `unfinished_collectives`, whose Work has the line's `SeqNum` and
/// `OpType`, on `group` where the log said which (the record's, [`watchdog_records`]), when
/// exactly one has. The timeout's own line names no group, so without one every group's records
/// are candidates. Otherwise, why none is named.
pub fn work_call(
    timeline: &Timeline,
    rank: u32,
    group: Option<u16>,
    message: &str,
) -> Result<(u32, OpRef), String> {
    let Some(work) = logged_work(message) else {
        return Err("the line names no WorkNCCL(SeqNum=…)".to_string());
    };
    let Some(records) = timeline.ranks.iter().find(|r| r.rank == rank) else {
        return Err(format!("the Timeline holds no rank {rank}"));
    };
    let completed = records
        .collectives
        .iter()
        .map(|c| (c.iteration, c.op, c.group, c.seq_num()));
    let unfinished = records
        .unfinished_collectives
        .iter()
        .map(|c| (c.iteration, c.op, c.group, c.seq_num()));
    // A coalescing block's Work is `COALESCED`, its record its calls' op; a barrier's Work is
    // the all_reduce it calls (R14).
    let prints = |op: OpRef| match work.op_type {
        None | Some("COALESCED") => true,
        Some(op_type) => timeline
            .ops
            .get(op as usize)
            .and_then(|info| match info.key.as_str() {
                "barrier" => Some(CollectiveKind::AllReduce),
                key => CollectiveKind::from_key(key),
            })
            .is_some_and(|kind| kind.op_type() == op_type),
    };
    let group_name = |group: u16| {
        timeline
            .scenario
            .groups
            .get(usize::from(group))
            .map_or("?", String::as_str)
    };
    let matching: Vec<(u32, OpRef, u16)> = completed
        .chain(unfinished)
        .filter(|&(_, op, on, seq_num)| {
            seq_num == work.seq_num && prints(op) && group.is_none_or(|group| group == on)
        })
        .map(|(iteration, op, group, _)| (iteration, op, group))
        .collect();
    let described = format!(
        "SeqNum={}{}{}",
        work.seq_num,
        work.op_type
            .map_or(String::new(), |op_type| format!(", OpType={op_type}")),
        group.map_or(String::new(), |group| format!(
            " on group {}",
            group_name(group)
        ))
    );
    match matching.as_slice() {
        [(iteration, op, _)] => Ok((*iteration, *op)),
        [] => Err(format!(
            "rank {rank} has no collective record of the Work with {described} (its Timeline left it out, or was written before the torch engine recorded unfinished collectives)"
        )),
        several => {
            let groups: Vec<&str> = several
                .iter()
                .map(|&(_, _, group)| group_name(group))
                .collect();
            Err(format!(
                "{} collective records of rank {rank} have {described} (groups {}), and PyTorch's log names no group for the line (its watchdog's next line, \"{FAILURE_DETECTED}…\", opens with the group's prefix: missing, or naming no group of the scenario)",
                several.len(),
                groups.join(", ")
            ))
        }
    }
}

/// Drops from `own`, the ranks' own records, those of a polling wait's timeout (R15) where
/// PyTorch's log (`logged`, [`watchdog_records`]) has the rank's: the interpreter writes the
/// simulator's two main-thread `wait_timeout` records and the `abort` after them all at the
/// raise, since Python cannot see when the timeout was found or the abort returned; the log's
/// lines are the same records at their own times. The rank's other records stay (a wait's
/// `wait_error` and its `abort`, of which PyTorch logs nothing).
pub fn drop_superseded(own: &mut Vec<WatchdogRecord>, logged: &[WatchdogRecord]) {
    let logged_ranks: BTreeSet<u32> = (logged.iter())
        .filter(|r| r.thread == ThreadKind::Main && r.event == WatchdogEvent::WaitTimeout)
        .map(|r| r.rank)
        .collect();
    own.retain(|r| {
        let of_a_timeout = r.thread == ThreadKind::Main
            && (r.event == WatchdogEvent::WaitTimeout
                || (r.event == WatchdogEvent::Abort && r.message.contains(WAIT_TIMED_OUT)));
        !(of_a_timeout && logged_ranks.contains(&r.rank))
    });
}

/// The findings PyTorch's log gives, from its `records` ([`watchdog_records`]) and the joined
/// `timeline` of the ranks' own files: a `watchdog_timeout` or `async_error` finding for each
/// Work a rank's watchdog timed out or found an error on, in the log's order, naming the call
/// that made the Work where the rank's records say which ([`work_call`]). One Work — the same
/// rank, group and `WorkNCCL(…)` — is one finding however often its line comes; a finding the
/// rank's own file already holds of that kind stands for the log's about the Work it names, or,
/// naming none, for the rank's first of its kind.
pub fn log_findings(timeline: &Timeline, records: &[WatchdogRecord]) -> Vec<Finding> {
    let mut findings: Vec<Finding> = Vec::new();
    // The file's findings that already stand for one of the log's.
    let mut stood_for: BTreeSet<usize> = BTreeSet::new();
    // The Works the log's findings are about: rank, kind, group and `WorkNCCL(…)`.
    let mut found: BTreeSet<(u32, &str, Option<u16>, Option<&str>)> = BTreeSet::new();
    for record in records {
        let kind = match (record.thread, record.event) {
            (ThreadKind::Watchdog, WatchdogEvent::Timeout) => FindingKind::WatchdogTimeout,
            (ThreadKind::Watchdog, WatchdogEvent::AsyncError) => FindingKind::AsyncError,
            _ => continue,
        };
        let work = work_named(&record.message);
        if !found.insert((record.rank, kind.as_str(), record.group, work)) {
            continue;
        }
        let of_the_rank = |index: &usize| {
            let finding = &timeline.findings[*index];
            finding.rank == Some(record.rank) && finding.kind == kind && !stood_for.contains(index)
        };
        let same_work = (0..timeline.findings.len())
            .filter(of_the_rank)
            .find(|&index| work.is_some() && work_named(&timeline.findings[index].message) == work);
        let no_work = (0..timeline.findings.len())
            .filter(of_the_rank)
            .find(|&index| work_named(&timeline.findings[index].message).is_none());
        if let Some(index) = same_work.or(no_work) {
            stood_for.insert(index);
            continue;
        }
        let message = format!("[Rank {}] (PyTorch's log) {}", record.rank, record.message);
        let (iteration, op, message) =
            match work_call(timeline, record.rank, record.group, &record.message) {
                Ok((iteration, op)) => (Some(iteration), Some(op), message),
                Err(why) => (
                    None,
                    None,
                    format!("{message} (no op or iteration named: {why})"),
                ),
            };
        findings.push(Finding {
            stands_for: Default::default(),
            kind,
            rank: Some(record.rank),
            iteration,
            op,
            stream: None,
            message,
        });
    }
    findings
}

#[cfg(test)]
mod tests;
