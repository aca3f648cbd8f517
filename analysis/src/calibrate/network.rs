//! The network's fit (R24): `kernel time = steps·α + volume/B` through measured multi-rank
//! collectives inside one node, by least squares on relative residuals. `calibrate` fits it to
//! measured Timelines; `import kineto` to a trace's NCCL kernels (docs/import.md).

use super::fit::{median, us};
use super::{CalibrationRun, FittedValue};
use sim::scenario::{CollectiveKind, OpKind};

/// One collective for the network fit: α steps, volume in bytes, measured kernel µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectivePoint {
    pub steps: f64,
    pub volume_bytes: f64,
    pub kernel_us: f64,
}

impl CollectivePoint {
    /// A `collective` over `ranks` ranks (2 or more) of `size_bytes` (the full, gathered size for
    /// all_gather, as R24 counts it) whose kernel took `kernel_us`: its ring's steps and volume.
    pub fn new(collective: CollectiveKind, ranks: u64, size_bytes: u64, kernel_us: f64) -> Self {
        let ring = collective.descriptor().ring;
        CollectivePoint {
            steps: ring.steps(ranks) as f64,
            volume_bytes: ring.volume_factor(ranks) * size_bytes as f64,
            kernel_us,
        }
    }

    /// The relative residual of the model at `alpha_us` and `beta_us_per_byte`, in %.
    fn residual_pct(&self, alpha_us: f64, beta_us_per_byte: f64) -> f64 {
        ((self.steps * alpha_us + self.volume_bytes * beta_us_per_byte) - self.kernel_us).abs()
            / self.kernel_us
            * 100.0
    }

    /// Each point weighs 1/t²: a 1 KiB and a 256 MiB collective count alike.
    fn weight(&self) -> f64 {
        1.0 / (self.kernel_us * self.kernel_us)
    }
}

/// Real multi-rank collectives inside one node: per (run, op) the median kernel time.
pub(super) fn collective_points(runs: &[CalibrationRun]) -> Vec<CollectivePoint> {
    let mut points = Vec::new();
    for run in runs {
        let t = run.timeline;
        let downscaled = t.machine.get("downscale").is_some_and(|d| d != "off");
        if downscaled {
            continue;
        }
        for op in &run.scenario.ops {
            let OpKind::Collective {
                collective, group, ..
            } = op.kind
            else {
                continue;
            };
            let ranks = &run.scenario.groups[group].ranks;
            if ranks.len() < 2 || ranks.iter().any(|&r| !run.scenario.same_node(ranks[0], r)) {
                continue;
            }
            let records: Vec<_> = t
                .ranks
                .iter()
                .flat_map(|r| &r.collectives)
                .filter(|c| c.op == op.index as u32 && c.iteration >= t.scenario.warmup)
                .collect();
            let Some(first) = records.first() else {
                continue;
            };
            let durations: Vec<f64> = records
                .iter()
                .map(|c| us(c.end_ns as i64 - c.kernel_start_ns as i64))
                .collect();
            points.push(CollectivePoint::new(
                collective,
                ranks.len() as u64,
                first.bytes,
                median(&durations),
            ));
        }
    }
    points
}

const METHOD: &str = "relative least squares of kernel time = steps·α + volume/B over real multi-rank collectives in one node (R24)";

/// Which of the model's values a fit gives.
#[derive(Clone, Copy, PartialEq)]
enum Fitted {
    AlphaAndBandwidth,
    Bandwidth,
}

/// The fitted values at `alpha_us` and `beta_us_per_byte`: `network.alpha_us` (where `which`
/// fitted it) and `network.nvlink_gbps`, with the median relative residual.
fn fitted(
    points: &[CollectivePoint],
    alpha_us: f64,
    beta_us_per_byte: f64,
    which: Fitted,
    method: &str,
) -> Vec<FittedValue> {
    let residuals: Vec<f64> = (points.iter())
        .map(|p| p.residual_pct(alpha_us, beta_us_per_byte))
        .collect();
    let residual = format!("{:.1}% of kernel time", median(&residuals));
    let value = |key: &str, value: f64| FittedValue {
        key: key.into(),
        value,
        samples: points.len(),
        residual: residual.clone(),
        method: method.into(),
    };
    let mut values = Vec::new();
    if which == Fitted::AlphaAndBandwidth {
        values.push(value("network.alpha_us", alpha_us));
    }
    values.push(value("network.nvlink_gbps", 1.0 / beta_us_per_byte / 1e3));
    values
}

/// Whether `points` tell α from B: two steps-to-volume ratios or more (one size of one
/// collective on one group size has one, however its kernel times spread).
pub fn tell_alpha_from_bandwidth(points: &[CollectivePoint]) -> bool {
    let Some(first) = points.first() else {
        return false;
    };
    points.iter().any(|p| {
        let (across, down) = (p.steps * first.volume_bytes, first.steps * p.volume_bytes);
        (across - down).abs() > SAME_RATIO * across.abs().max(down.abs())
    })
}

/// Two steps-to-volume ratios closer than this, relatively, are one: the fit's rounding, not a
/// second size.
const SAME_RATIO: f64 = 1e-9;

/// `t = steps·α + volume/B` by least squares on relative residuals: `network.alpha_us` and
/// `network.nvlink_gbps`. Nothing where the points cannot tell α from B
/// (`tell_alpha_from_bandwidth`) or the best line has no positive bandwidth.
pub fn fit_network(points: &[CollectivePoint]) -> Vec<FittedValue> {
    if !tell_alpha_from_bandwidth(points) {
        return Vec::new();
    }
    // Unknowns: α (µs), β = 1/B (µs per byte). Normal equations of Σ ((steps·α + v·β − t)/t)².
    let (mut saa, mut sab, mut sbb, mut sat, mut sbt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in points {
        let w = p.weight();
        saa += w * p.steps * p.steps;
        sab += w * p.steps * p.volume_bytes;
        sbb += w * p.volume_bytes * p.volume_bytes;
        sat += w * p.steps * p.kernel_us;
        sbt += w * p.volume_bytes * p.kernel_us;
    }
    let determinant = saa * sbb - sab * sab;
    if determinant.abs() < f64::EPSILON * saa * sbb {
        return Vec::new();
    }
    let alpha_us = ((sat * sbb - sab * sbt) / determinant).max(0.0);
    let beta_us_per_byte = (saa * sbt - sab * sat) / determinant;
    if beta_us_per_byte <= 0.0 {
        return Vec::new();
    }
    fitted(
        points,
        alpha_us,
        beta_us_per_byte,
        Fitted::AlphaAndBandwidth,
        METHOD,
    )
}

/// The same fit with α known (where [`fit_network`] cannot tell it from B): `network.nvlink_gbps`
/// alone, the β minimising Σ ((steps·α + v·β − t)/t)²; nothing where no point moves data or
/// that β is not positive (the kernels are shorter than α alone makes them).
pub fn fit_bandwidth_given_alpha(points: &[CollectivePoint], alpha_us: f64) -> Vec<FittedValue> {
    let (mut svv, mut svt) = (0.0, 0.0);
    for p in points {
        let w = p.weight();
        svv += w * p.volume_bytes * p.volume_bytes;
        svt += w * p.volume_bytes * (p.kernel_us - p.steps * alpha_us);
    }
    if svv <= 0.0 || svt <= 0.0 {
        return Vec::new();
    }
    let method = format!("{METHOD}, α = {alpha_us} µs given");
    fitted(points, alpha_us, svt / svv, Fitted::Bandwidth, &method)
}
