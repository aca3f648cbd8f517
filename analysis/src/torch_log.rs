//! PyTorch's own error-path log lines (glog style, `[rank0]:[E1201 03:54:42.518274455
//! ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: …`) turned
//! into Timeline watchdog records: what the watchdog did in a `c10dsim torch` run, which the
//! Python interpreter cannot see from the main thread (docs/torch.md). Pure: text in, records
//! out.

use sim::timeline::{ThreadKind, WatchdogEvent, WatchdogRecord};

/// Which log lines become which records, by a phrase of the message.
const EVENTS: [(&str, ThreadKind, WatchdogEvent); 7] = [
    (
        "Watchdog caught collective operation timeout",
        ThreadKind::Watchdog,
        WatchdogEvent::Timeout,
    ),
    (
        "to signal dumping",
        ThreadKind::Watchdog,
        WatchdogEvent::DumpSignal,
    ),
    (
        "preparing to dump debug info",
        ThreadKind::Watchdog,
        WatchdogEvent::Dump,
    ),
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
];

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

/// `[rank0]:[E1201 03:54:42.518274455 File.cpp:1] message` → (rank, Unix ns, message); the
/// clock is read as UTC.
fn parse_line(line: &str, year: i64) -> Option<(u32, u64, &str)> {
    let rest = line.strip_prefix("[rank")?;
    let (rank, rest) = rest.split_once("]:[")?;
    let rank: u32 = rank.parse().ok()?;
    let (header, message) = rest.split_once("] ")?;
    let mut fields = header.split(' ');
    let date = fields.next()?.get(1..)?;
    let time = fields.next()?;
    let month: i64 = date.get(0..2)?.parse().ok()?;
    let day: i64 = date.get(2..4)?.parse().ok()?;
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
    let unix_ns = u64::try_from(seconds * 1_000_000_000 + i128::from(nanos)).ok()?;
    Some((rank, unix_ns, message.trim()))
}

/// The watchdog records in `log` (PyTorch's stderr of a launch), on the axis whose time 0 is
/// `origin_unix_ns`; lines before the origin, or of another kind, are skipped.
pub fn watchdog_records(log: &str, origin_unix_ns: u64) -> Vec<WatchdogRecord> {
    let year = year_of(origin_unix_ns);
    let mut records = Vec::new();
    for line in log.lines() {
        let Some((rank, unix_ns, message)) = parse_line(line, year) else {
            continue;
        };
        // The watchdog thread's exception repeats the timeout's message: one record is enough
        // (a broken promise at exit says something of its own).
        if message.contains("terminated with exception") && !message.contains("std::future_error") {
            continue;
        }
        let Some((_, thread, event)) = EVENTS
            .iter()
            .find(|(phrase, _, _)| message.contains(phrase))
        else {
            continue;
        };
        let Some(at_ns) = unix_ns.checked_sub(origin_unix_ns) else {
            continue;
        };
        records.push(WatchdogRecord {
            stands_for: Default::default(),
            rank,
            group: None,
            thread: *thread,
            event: *event,
            at_ns,
            message: message.to_string(),
        });
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 12, 1), 20_788);
        assert_eq!(year_of(20_788 * 86_400 * 1_000_000_000), 2026);
    }

    #[test]
    fn the_measured_gpu_backlog_timeout_log_gives_pytorch_s_error_path() {
        // Measured on the H200 (tests/data/torch): a 1 s timeout behind a 3 s GPU backlog.
        let log = include_str!("../../tests/data/torch/gpu_backlog_timeout.run1.log");
        let origin_unix_ns =
            20_789 * 86_400 * 1_000_000_000 + (9 * 3600 + 45 * 60 + 16) * 1_000_000_000;
        let records = watchdog_records(log, origin_unix_ns);
        let events: Vec<WatchdogEvent> = records.iter().map(|r| r.event).collect();
        assert_eq!(
            events,
            [
                WatchdogEvent::Timeout,
                WatchdogEvent::DumpSignal,
                WatchdogEvent::Dump,
                WatchdogEvent::Exit
            ]
        );
        // 09:45:18.532084737 is 2.532084737 s after the origin chosen at 09:45:16.
        assert_eq!(records[0].at_ns, 2_532_084_737);
        assert_eq!(records[0].rank, 0);
        assert!(records[0].message.contains("Timeout(ms)=1000"));
        // From the timeout to the process being taken down (09:45:25.994156319): 7.462 s.
        assert_eq!(records[3].at_ns - records[0].at_ns, 7_462_071_582);
    }

    #[test]
    fn the_lines_of_a_failed_exit_become_records_r31() {
        // Measured on the H200 (tests/data/torch/probes/exit_with_pending_work.txt): the
        // watchdog's broken promise after a timeout in the exit window, and the destructor's
        // abort timing out with no Work pending.
        let log = "[rank0]:[E1202 18:44:57.528857658 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=500) ran for 500 milliseconds before timing out.\n\
[rank0]:[E1202 18:44:57.529498335 ProcessGroupNCCL.cpp:2119] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: std::future_error: Broken promise\n\
[rank0]:[E1202 18:45:13.470668122 ProcessGroupNCCL.cpp:1389] [PG ID 0 PG GUID 0(default_pg) Rank 0] Future for ProcessGroup abort timed out after 500 ms\n";
        let origin_unix_ns =
            20_789 * 86_400 * 1_000_000_000 + (18 * 3600 + 44 * 60) * 1_000_000_000;
        let records = watchdog_records(log, origin_unix_ns);
        let kinds: Vec<(ThreadKind, WatchdogEvent)> =
            records.iter().map(|r| (r.thread, r.event)).collect();
        assert_eq!(
            kinds,
            [
                (ThreadKind::Watchdog, WatchdogEvent::Timeout),
                (ThreadKind::Watchdog, WatchdogEvent::Exit),
                (ThreadKind::Main, WatchdogEvent::Abort)
            ]
        );
        assert_eq!(records[1].at_ns - records[0].at_ns, 640_677);
    }

    #[test]
    fn a_clock_out_of_range_is_not_a_watchdog_line() {
        // An hour of 10^13 overflowed the nanoseconds (a panic with overflow checks on, a
        // wrong time without); such a line is skipped like any other that is not PyTorch's.
        let line = "[rank0]:[E1201 9999999999999:54:42.5 F.cpp:1] Watchdog caught collective operation timeout";
        assert_eq!(parse_line(line, 2026), None);
        for bad in [
            "E1301 03:54:42.5",
            "E1232 03:54:42.5",
            "E1201 24:00:00.0",
            "E1201 03:60:00.0",
            "E1201 03:54:61.0",
            "E1201 -1:54:42.5",
        ] {
            let line = format!("[rank0]:[{bad} F.cpp:1] message");
            assert_eq!(parse_line(&line, 2026), None, "{bad}");
        }
        assert!(parse_line("[rank0]:[E1201 23:59:60.999 F.cpp:1] message", 2026).is_some());
        assert!(watchdog_records(&format!("{line}\n"), 0).is_empty());
        // A time 0 in the year 2343 (cargo fuzz): its nanoseconds overflowed an i64.
        let late =
            "[rank0]:[E1201 03:54:42.5 F.cpp:1] Watchdog caught collective operation timeout";
        assert!(parse_line(late, 2343).is_some());
        assert_eq!(watchdog_records(late, 11_796_204_716_000_000_000).len(), 1);
    }
}
