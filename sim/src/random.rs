//! Seeded randomness: straggler delays drawn from distributions and kernel jitter.
//!
//! Every random stream comes from the scenario's seed through a portable generator (ChaCha8):
//! one stream per rank, drawn in the rank's program order, and one per collective keyed by
//! (group, sequence number). So a run replays exactly, whatever order events are processed in,
//! and the hardware backend can draw the very delays the simulator drew.
//!
//! ```
//! use sim::random::{rank_rng, Delay};
//! let delay = Delay::Normal { mean_ns: 200_000.0, std_ns: 50_000.0 };
//! let a = delay.sample_ns(&mut rank_rng(7, 3));
//! let b = delay.sample_ns(&mut rank_rng(7, 3));
//! assert_eq!(a, b);
//! ```

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use statrs::distribution::{Exp, Gamma, LogNormal, Normal, Uniform};

use crate::units::MAX_TIME_NS;

/// Smallest and largest shape of a gamma delay: outside these the draws are all but 0 or all
/// but the mean, and the sampler's arithmetic loses its meaning.
pub const MIN_GAMMA_SHAPE: f64 = 1e-3;
pub const MAX_GAMMA_SHAPE: f64 = 1e6;

/// The generator of every random stream.
pub type StreamRng = ChaCha8Rng;

/// SplitMix64's finaliser: spreads a seed and a stream index into an independent seed.
pub fn mix_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random stream of one rank's host program.
pub fn rank_rng(seed: u64, rank: u32) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix_seed(seed, u64::from(rank)))
}

/// The random stream of one collective, shared by all its ranks.
pub fn collective_rng(seed: u64, group: usize, seq: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix_seed(mix_seed(seed, 0x636f_6c6c ^ group as u64), seq))
}

/// A delay: fixed, or drawn from a distribution (parameters in nanoseconds; negative draws
/// count as no delay, draws above one day as one day).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "distribution", rename_all = "lowercase")]
pub enum Delay {
    Fixed {
        ns: u64,
    },
    Normal {
        mean_ns: f64,
        std_ns: f64,
    },
    /// Parameterised by the delay's own mean and standard deviation.
    LogNormal {
        mean_ns: f64,
        std_ns: f64,
    },
    Exponential {
        mean_ns: f64,
    },
    Gamma {
        shape: f64,
        scale_ns: f64,
    },
    Uniform {
        min_ns: f64,
        max_ns: f64,
    },
}

impl Delay {
    pub const NONE: Delay = Delay::Fixed { ns: 0 };

    pub fn is_none(&self) -> bool {
        *self == Delay::NONE
    }

    /// Checks the parameters against their documented ranges (docs/scenario-format.md,
    /// `[[perturb]]`); the message says what is wrong. Times are at most one day
    /// ([`MAX_TIME_NS`]); a gamma's shape is between [`MIN_GAMMA_SHAPE`] and
    /// [`MAX_GAMMA_SHAPE`] and its mean (shape × scale) at most one day.
    pub fn validate(&self) -> Result<(), String> {
        let max_ns = MAX_TIME_NS as f64;
        let max_us = max_ns / 1e3;
        let positive = |value: f64, what: &str| {
            if value.is_finite() && value > 0.0 && value <= max_ns {
                Ok(())
            } else {
                Err(format!(
                    "{what} must be > 0 and at most one day ({max_us} µs), found {} µs",
                    value / 1e3
                ))
            }
        };
        match *self {
            Delay::Fixed { ns } if ns <= MAX_TIME_NS => Ok(()),
            Delay::Fixed { ns } => Err(format!(
                "the delay must be at most one day ({max_us} µs), found {} µs",
                ns as f64 / 1e3
            )),
            Delay::Normal { mean_ns, std_ns } => {
                positive(std_ns, "std")?;
                if mean_ns.is_finite() && mean_ns.abs() <= max_ns {
                    Ok(())
                } else {
                    Err(format!(
                        "mean must be between -{max_us} and {max_us} µs (one day), found {} µs",
                        mean_ns / 1e3
                    ))
                }
            }
            Delay::LogNormal { mean_ns, std_ns } => {
                positive(mean_ns, "mean")?;
                positive(std_ns, "std")
            }
            Delay::Exponential { mean_ns } => positive(mean_ns, "mean"),
            Delay::Gamma { shape, scale_ns } => {
                if !(MIN_GAMMA_SHAPE..=MAX_GAMMA_SHAPE).contains(&shape) {
                    return Err(format!(
                        "shape must be between {MIN_GAMMA_SHAPE} and {MAX_GAMMA_SHAPE}, found {shape}"
                    ));
                }
                positive(scale_ns, "scale")?;
                positive(shape * scale_ns, "the mean (shape × scale)")
            }
            Delay::Uniform {
                min_ns,
                max_ns: high_ns,
            } => {
                if min_ns.is_finite()
                    && high_ns.is_finite()
                    && 0.0 <= min_ns
                    && min_ns < high_ns
                    && high_ns <= max_ns
                {
                    Ok(())
                } else {
                    Err(format!(
                        "uniform needs 0 <= min < max <= one day ({max_us} µs), found min {} µs, max {} µs",
                        min_ns / 1e3,
                        high_ns / 1e3
                    ))
                }
            }
        }
    }

    /// Draws one delay. Fixed delays draw nothing, so adding one never shifts other streams.
    pub fn sample_ns(&self, rng: &mut ChaCha8Rng) -> u64 {
        use rand::distributions::Distribution;
        let value = match *self {
            Delay::Fixed { ns } => return ns,
            Delay::Normal { mean_ns, std_ns } => {
                Normal::new(mean_ns, std_ns).expect("validated").sample(rng)
            }
            Delay::LogNormal { mean_ns, std_ns } => {
                // Moments of the delay → parameters of its logarithm. A spread too small to
                // show in an f64 (σ² rounds to 0) is the mean itself.
                let sigma2 = (std_ns / mean_ns).powi(2).ln_1p();
                if sigma2 <= 0.0 {
                    return (mean_ns.round() as u64).min(MAX_TIME_NS);
                }
                let mu = mean_ns.ln() - sigma2 / 2.0;
                LogNormal::new(mu, sigma2.sqrt())
                    .expect("validated")
                    .sample(rng)
            }
            Delay::Exponential { mean_ns } => {
                Exp::new(1.0 / mean_ns).expect("validated").sample(rng)
            }
            Delay::Gamma { shape, scale_ns } => Gamma::new(shape, 1.0 / scale_ns)
                .expect("validated")
                .sample(rng),
            Delay::Uniform { min_ns, max_ns } => {
                Uniform::new(min_ns, max_ns).expect("validated").sample(rng)
            }
        };
        // A draw from a long tail may be larger than any time the engine adds up: capped at
        // one day, as every time a scenario states.
        (value.max(0.0).round() as u64).min(MAX_TIME_NS)
    }
}

/// Multiplies a duration by `1 + N(0, jitter_fraction)` (never below zero): per-kernel jitter.
pub fn jittered_ns(duration_ns: u64, jitter_fraction: f64, rng: &mut ChaCha8Rng) -> u64 {
    apply_jitter(duration_ns, jitter_factor(jitter_fraction, rng))
}

/// The factor `1 + N(0, jitter_fraction)` a kernel's duration is multiplied by; 1 without a
/// draw when there is no jitter.
pub fn jitter_factor(jitter_fraction: f64, rng: &mut ChaCha8Rng) -> f64 {
    if jitter_fraction <= 0.0 {
        return 1.0;
    }
    use rand::distributions::Distribution;
    Normal::new(1.0, jitter_fraction)
        .expect("a positive jitter")
        .sample(rng)
}

/// A duration times a [`jitter_factor`] (a negative factor counts as zero), rounded to ns and
/// kept within what the model holds ([`crate::units::modelled_ns`]).
pub fn apply_jitter(duration_ns: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        return duration_ns;
    }
    crate::units::modelled_ns(duration_ns as f64 * factor.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawn_jitter_factor_applied_later_gives_the_jittered_duration() {
        let (mut a, mut b) = (rank_rng(7, 1), rank_rng(7, 1));
        for duration_ns in [0, 1, 999, 1_234_567] {
            let factor = jitter_factor(0.2, &mut b);
            assert_eq!(
                jittered_ns(duration_ns, 0.2, &mut a),
                apply_jitter(duration_ns, factor)
            );
        }
        assert_eq!(jitter_factor(0.0, &mut a), 1.0);
        assert_eq!(apply_jitter(5, -0.5), 0);
    }

    fn mean_of(delay: Delay) -> f64 {
        let mut rng = rank_rng(1, 0);
        let n = 20_000;
        (0..n)
            .map(|_| delay.sample_ns(&mut rng) as f64)
            .sum::<f64>()
            / n as f64
    }

    #[test]
    fn distributions_have_their_means() {
        let close = |actual: f64, expected: f64| (actual - expected).abs() / expected < 0.03;
        assert!(close(
            mean_of(Delay::Normal {
                mean_ns: 1e6,
                std_ns: 1e5
            }),
            1e6
        ));
        assert!(close(
            mean_of(Delay::LogNormal {
                mean_ns: 2e5,
                std_ns: 5e4
            }),
            2e5
        ));
        assert!(close(mean_of(Delay::Exponential { mean_ns: 3e5 }), 3e5));
        assert!(close(
            mean_of(Delay::Gamma {
                shape: 2.0,
                scale_ns: 1e5
            }),
            2e5
        ));
        assert!(close(
            mean_of(Delay::Uniform {
                min_ns: 0.0,
                max_ns: 4e5
            }),
            2e5
        ));
        assert_eq!(mean_of(Delay::Fixed { ns: 7 }), 7.0);
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        let delay = Delay::Exponential { mean_ns: 1e6 };
        let draw = |seed, rank| delay.sample_ns(&mut rank_rng(seed, rank));
        assert_eq!(draw(5, 2), draw(5, 2));
        assert_ne!(draw(5, 2), draw(5, 3));
        assert_ne!(draw(5, 2), draw(6, 2));
        let mut a = collective_rng(5, 0, 1);
        let mut b = collective_rng(5, 0, 2);
        assert_ne!(
            jittered_ns(1_000_000, 0.1, &mut a),
            jittered_ns(1_000_000, 0.1, &mut b)
        );
    }

    #[test]
    fn bad_parameters_are_explained() {
        assert!(Delay::Normal {
            mean_ns: 1.0,
            std_ns: 0.0
        }
        .validate()
        .unwrap_err()
        .contains("std"));
        assert!(Delay::Uniform {
            min_ns: 5.0,
            max_ns: 1.0
        }
        .validate()
        .unwrap_err()
        .contains("min < max"));
        assert!(Delay::Gamma {
            shape: -1.0,
            scale_ns: 1.0
        }
        .validate()
        .is_err());
    }

    #[test]
    fn zero_jitter_keeps_durations() {
        assert_eq!(jittered_ns(1234, 0.0, &mut rank_rng(0, 0)), 1234);
    }

    #[test]
    fn parameters_beyond_one_day_or_a_sane_shape_are_refused() {
        let huge = Delay::Normal {
            mean_ns: 1e33,
            std_ns: 1e33,
        };
        assert!(huge.validate().unwrap_err().contains("at most one day"));
        assert!(Delay::Exponential { mean_ns: 1e30 }.validate().is_err());
        assert!(Delay::Uniform {
            min_ns: 0.0,
            max_ns: 1e20
        }
        .validate()
        .is_err());
        assert!(Delay::Gamma {
            shape: 1e-9,
            scale_ns: 1.0
        }
        .validate()
        .unwrap_err()
        .contains("shape"));
        assert!(Delay::Gamma {
            shape: 1e6,
            scale_ns: 1e12
        }
        .validate()
        .unwrap_err()
        .contains("shape × scale"));
        assert!(Delay::Fixed {
            ns: MAX_TIME_NS + 1
        }
        .validate()
        .is_err());
    }

    #[test]
    fn a_lognormal_too_narrow_for_an_f64_draws_its_mean() {
        let delay = Delay::LogNormal {
            mean_ns: 200e3,
            std_ns: 1e-6,
        };
        delay.validate().unwrap();
        assert_eq!(delay.sample_ns(&mut rank_rng(1, 0)), 200_000);
    }

    #[test]
    fn draws_from_a_long_tail_stop_at_one_day() {
        let delay = Delay::LogNormal {
            mean_ns: 1e12,
            std_ns: MAX_TIME_NS as f64,
        };
        delay.validate().unwrap();
        let mut rng = rank_rng(3, 0);
        let largest = (0..10_000)
            .map(|_| delay.sample_ns(&mut rng))
            .max()
            .unwrap();
        assert_eq!(largest, MAX_TIME_NS);
    }
}
