//! The spread of a figure measured several times (`c10dsim bench --repeat`): its least,
//! median and greatest value, so that every figure is reported with its spread and two
//! binaries' figures are compared by their ranges, not by one run each (docs/perf.md).

/// The least, median and greatest of a figure's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub runs: usize,
}

impl Spread {
    /// The spread of `values`; `None` when there are none, or one is not a number.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Spread {
            min: sorted[0],
            median,
            max: sorted[n - 1],
            runs: n,
        })
    }

    /// Whether the two ranges share a value: then the runs do not tell the two apart.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_is_least_median_greatest() {
        let spread = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((spread.min, spread.median, spread.max), (1.0, 2.0, 3.0));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn ranges_that_share_a_value_overlap() {
        let a = Spread::of(&[1.0, 2.0]).unwrap();
        assert!(a.overlaps(&Spread::of(&[2.0, 5.0]).unwrap()));
        assert!(!a.overlaps(&Spread::of(&[2.5, 5.0]).unwrap()));
        assert!(Spread::of(&[0.0, 9.0]).unwrap().overlaps(&a));
    }
}
