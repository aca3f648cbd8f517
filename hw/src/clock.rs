//! Putting GPU times on the host axis (R1–R3).
//!
//! The host axis is a monotonic clock in nanoseconds since the run's origin. The GPU has its
//! own clock, read only as differences between timed CUDA events. To join them, an *anchor*
//! event is recorded on an idle stream and synchronised: the GPU executed the record somewhere
//! between the host instant just before the record and the instant the synchronise returned.
//! Several tries keep the tightest bracket; its midpoint is the anchor's host time and half its
//! width the alignment's uncertainty. The same is done again once the run drained, because the
//! two clocks drift apart by a few parts per million (5 µs over 2.5 s was seen on an H200): an
//! event's host time is the start anchor's plus its elapsed time from that anchor, scaled by
//! the rate the two anchors measured, so that the error stays within the anchors' uncertainty
//! over the whole run.
//!
//! Host delays (a straggler's `host_delay_us`, `host_sleep` ops, blocking-wait polls) are timed
//! on the same monotonic clock by [`precise_sleep`].

use std::time::{Duration, Instant};

/// One try: host instants around `record(anchor); synchronize(anchor)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnchorSample {
    pub before_ns: u64,
    pub after_ns: u64,
}

/// The chosen alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockAnchor {
    /// Host time given to the anchor event.
    pub host_ns: u64,
    /// Half the bracket's width: how far off any aligned GPU time can be.
    pub uncertainty_ns: u64,
    /// Which sample was kept (its event is the anchor).
    pub sample: usize,
}

impl ClockAnchor {
    /// Keeps the tightest sample. Panics on an empty list (the caller always takes some).
    pub fn choose(samples: &[AnchorSample]) -> ClockAnchor {
        let (index, best) = samples
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.after_ns.saturating_sub(s.before_ns))
            .expect("at least one anchor sample");
        let width = best.after_ns.saturating_sub(best.before_ns);
        ClockAnchor {
            host_ns: best.before_ns + width / 2,
            uncertainty_ns: width.div_ceil(2),
            sample: index,
        }
    }
}

/// Start and end anchors joined: GPU elapsed times mapped onto the host axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockMap {
    pub start: ClockAnchor,
    /// Host nanoseconds per GPU nanosecond.
    pub rate: f64,
    /// The larger of the two anchors' uncertainties.
    pub uncertainty_ns: u64,
}

impl ClockMap {
    /// `gpu_elapsed_ms` is `cuEventElapsedTime` from the start anchor's event to the end
    /// anchor's. Runs shorter than 1 ms keep rate 1; a rate off by more than 0.1% (no clock
    /// drifts that much) is taken as a measuring error and held at that bound.
    pub fn new(start: ClockAnchor, end: ClockAnchor, gpu_elapsed_ms: f32) -> ClockMap {
        let gpu_ns = f64::from(gpu_elapsed_ms) * 1e6;
        let host_ns = end.host_ns as f64 - start.host_ns as f64;
        let rate = if gpu_ns > 1e6 {
            (host_ns / gpu_ns).clamp(1.0 - 1e-3, 1.0 + 1e-3)
        } else {
            1.0
        };
        ClockMap {
            start,
            rate,
            uncertainty_ns: start.uncertainty_ns.max(end.uncertainty_ns),
        }
    }

    /// Host time of an event that fired `elapsed_ms` (CUDA's `cuEventElapsedTime`, a float in
    /// milliseconds with about 0.5 µs resolution) after the start anchor. Events never precede
    /// the anchor; a tiny negative value from rounding is held near it.
    pub fn to_host_ns(self, elapsed_ms: f32) -> u64 {
        let offset_ns = (f64::from(elapsed_ms) * 1e6 * self.rate).round();
        if offset_ns <= 0.0 {
            self.start.host_ns.saturating_sub((-offset_ns) as u64)
        } else {
            self.start.host_ns + offset_ns as u64
        }
    }

    /// How much faster the host clock ran than the GPU's, in parts per million.
    pub fn drift_ppm(self) -> f64 {
        (self.rate - 1.0) * 1e6
    }
}

/// How far before a host delay's deadline the thread stops sleeping and spins on the monotonic
/// clock. Linux ends a `thread::sleep` late by its timer slack (50 µs) plus the wake-up: the
/// 4-GPU straggler runs measured 53–66 µs (docs/multi-gpu.md); 200 µs leaves room for a loaded
/// host.
pub const SPIN_BEFORE_DEADLINE_NS: u64 = 200_000;

/// The part of `remaining_ns` that may be slept coarsely (the rest is spun); none when the
/// deadline is within the spin window.
pub fn coarse_sleep_ns(remaining_ns: u64) -> Option<u64> {
    remaining_ns
        .checked_sub(SPIN_BEFORE_DEADLINE_NS)
        .filter(|&sleep_ns| sleep_ns > 0)
}

/// Blocks the thread for `duration_ns`, returning within about a microsecond of the deadline:
/// a coarse sleep until [`SPIN_BEFORE_DEADLINE_NS`] before it, then a spin on [`Instant`].
pub fn precise_sleep(duration_ns: u64) {
    let deadline = Instant::now() + Duration::from_nanos(duration_ns);
    loop {
        let Some(remaining) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        match coarse_sleep_ns(remaining.as_nanos() as u64) {
            Some(sleep_ns) => std::thread::sleep(Duration::from_nanos(sleep_ns)),
            None => std::hint::spin_loop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_coarsely_only_outside_the_spin_window() {
        assert_eq!(coarse_sleep_ns(0), None);
        assert_eq!(coarse_sleep_ns(SPIN_BEFORE_DEADLINE_NS), None);
        assert_eq!(coarse_sleep_ns(SPIN_BEFORE_DEADLINE_NS - 1), None);
        assert_eq!(
            coarse_sleep_ns(SPIN_BEFORE_DEADLINE_NS + 5_000),
            Some(5_000)
        );
        assert_eq!(
            coarse_sleep_ns(10_000_000),
            Some(10_000_000 - SPIN_BEFORE_DEADLINE_NS)
        );
    }

    #[test]
    fn a_precise_sleep_never_ends_before_its_duration() {
        // How near the deadline it ends is a matter of load (a busy 2-core host overshot a
        // 2 ms bound): not a test's business, the spin window above is.
        let start = Instant::now();
        precise_sleep(300_000);
        let slept_ns = start.elapsed().as_nanos() as u64;
        assert!(slept_ns >= 300_000, "{slept_ns} ns");
    }

    #[test]
    fn tightest_bracket_wins_and_gives_the_midpoint() {
        let samples = [
            AnchorSample {
                before_ns: 100,
                after_ns: 180,
            },
            AnchorSample {
                before_ns: 1_000,
                after_ns: 1_011,
            },
            AnchorSample {
                before_ns: 2_000,
                after_ns: 2_040,
            },
        ];
        let anchor = ClockAnchor::choose(&samples);
        assert_eq!(anchor.sample, 1);
        assert_eq!(anchor.host_ns, 1_005);
        assert_eq!(anchor.uncertainty_ns, 6);
    }

    #[test]
    fn elapsed_milliseconds_map_to_host_nanoseconds() {
        let start = ClockAnchor {
            host_ns: 5_000,
            uncertainty_ns: 3,
            sample: 0,
        };
        let same_rate = ClockMap::new(start, start, 0.0);
        assert_eq!(same_rate.rate, 1.0);
        assert_eq!(same_rate.to_host_ns(0.0), 5_000);
        assert_eq!(same_rate.to_host_ns(1.5), 1_505_000);
        assert_eq!(same_rate.to_host_ns(0.0025), 7_500);
        assert_eq!(same_rate.to_host_ns(-0.001), 4_000);
    }

    #[test]
    fn drift_between_the_anchors_is_corrected() {
        let start = ClockAnchor {
            host_ns: 1_000,
            uncertainty_ns: 2,
            sample: 3,
        };
        // The host saw 1 s + 4 µs while the GPU counted 1 s: 4 ppm.
        let end = ClockAnchor {
            host_ns: 1_000 + 1_000_004_000,
            uncertainty_ns: 5,
            sample: 0,
        };
        let map = ClockMap::new(start, end, 1_000.0);
        assert!((map.drift_ppm() - 4.0).abs() < 0.01, "{}", map.drift_ppm());
        assert_eq!(map.uncertainty_ns, 5);
        assert_eq!(map.to_host_ns(500.0), 1_000 + 500_002_000);
        assert_eq!(map.to_host_ns(1_000.0), end.host_ns);
        // A wild rate is a measuring error, held at 0.1%.
        let wild = ClockMap::new(start, end, 500.0);
        assert_eq!(wild.rate, 1.001);
    }
}
