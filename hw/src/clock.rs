//! Putting GPU times on the host axis (R1–R3).
//!
//! The host axis is a monotonic clock in nanoseconds since the run's origin. The GPU has its
//! own clock, read only as differences between timed CUDA events. To join them, an *anchor*
//! event is recorded on an idle stream and synchronised: the GPU executed the record somewhere
//! between the host instant just before the record and the instant the synchronise returned.
//! Several tries keep the tightest bracket; its midpoint is the anchor's host time and half its
//! width the alignment's uncertainty. Every other event's host time is then the anchor's plus
//! the event's elapsed time from the anchor.

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

    /// Host time of an event that fired `elapsed_ms` (CUDA's `cuEventElapsedTime`, a float in
    /// milliseconds with about 0.5 µs resolution) after the anchor. Events never precede the
    /// anchor; a tiny negative value from rounding is held at the anchor.
    pub fn to_host_ns(self, elapsed_ms: f32) -> u64 {
        let offset_ns = (f64::from(elapsed_ms) * 1e6).round();
        if offset_ns <= 0.0 {
            self.host_ns.saturating_sub((-offset_ns) as u64)
        } else {
            self.host_ns + offset_ns as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let anchor = ClockAnchor {
            host_ns: 5_000,
            uncertainty_ns: 3,
            sample: 0,
        };
        assert_eq!(anchor.to_host_ns(0.0), 5_000);
        assert_eq!(anchor.to_host_ns(1.5), 1_505_000);
        assert_eq!(anchor.to_host_ns(0.0025), 7_500);
        assert_eq!(anchor.to_host_ns(-0.001), 4_000);
    }
}
