//! A long `run`'s progress on a terminal: the engine reports the events it processed and the
//! simulated time it reached ([`sim::engine::Options::progress`]); from the second second on,
//! one line on standard error, rewritten at most once a second and cleared at the end. Nothing
//! is printed when standard error is not a terminal (a pipe, a file, CI), so outputs stay as
//! they were.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When the run started and when the line was last drawn (`None` until it is).
static SHOWN: Mutex<Option<(Instant, Option<Instant>)>> = Mutex::new(None);

/// The engine's progress hook for this process: `Some` where standard error is a terminal.
pub fn hook() -> Option<fn(u64, u64)> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    if let Ok(mut shown) = SHOWN.lock() {
        *shown = Some((Instant::now(), None));
    }
    Some(report)
}

fn report(events: u64, simulated_ns: u64) {
    let Ok(mut shown) = SHOWN.lock() else {
        return;
    };
    let Some((started, drawn)) = shown.as_mut() else {
        return;
    };
    let now = Instant::now();
    let due = drawn.map_or(started.elapsed(), |at| now - at) >= Duration::from_secs(1);
    if !due {
        return;
    }
    *drawn = Some(now);
    let _ = write!(
        std::io::stderr(),
        "\r\x1b[2K{}",
        line(started.elapsed(), events, simulated_ns)
    );
}

/// The progress line.
fn line(elapsed: Duration, events: u64, simulated_ns: u64) -> String {
    format!(
        "c10dsim: simulating: {:.1} M events, simulated time {:.3} s, {:.0} s elapsed",
        events as f64 / 1e6,
        simulated_ns as f64 / 1e9,
        elapsed.as_secs_f64()
    )
}

/// Clears the line if one was drawn.
pub fn finish() {
    if let Ok(mut shown) = SHOWN.lock() {
        if let Some((_, Some(_))) = shown.take() {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_gives_events_in_millions_and_both_times() {
        assert_eq!(
            line(Duration::from_millis(2_400), 12_345_678, 45_200_000_000),
            "c10dsim: simulating: 12.3 M events, simulated time 45.200 s, 2 s elapsed"
        );
    }

    #[test]
    fn nothing_is_drawn_before_the_hook_or_after_the_end() {
        finish();
        report(5, 5);
        assert!(SHOWN.lock().unwrap().is_none());
    }
}
