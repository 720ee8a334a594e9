//! Accuracy of latency estimates against a full RTT matrix (paper `001` §6.3.1).
//!
//! The paper's metric is the *directed relative error* of each pair, "ping-measured
//! all-to-all RTTs compared to the latency estimates" (§6.3.1, Fig. 6). We compute, for
//! every **ordered** pair `(i, j)`, `i ≠ j`, whose true RTT is positive (the PlanetLab
//! matrix is asymmetric, so both directions count, each against its own measurement):
//!
//! ```text
//! directed(i, j) = (est(i, j) − true(i, j)) / true(i, j)      (signed: > 0 overestimates)
//! relative(i, j) = |est(i, j) − true(i, j)| / true(i, j)
//! ```
//!
//! Pairs with a true RTT of 0 are skipped (and counted in [`ErrorSummary::skipped`]).
//! Pairs with tiny true RTTs (PlanetLab has 0.175 ms) are kept: their relative errors are
//! large, and that is part of the honest figure. Quantiles use the nearest-rank rule on the
//! sorted values: `q(p) = sorted[⌈p·n⌉ − 1]`.

use serde::Serialize;

/// Relative and directed errors of every ordered pair with a positive true RTT.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairErrors {
    /// `|est − true| / true` per pair.
    pub relative: Vec<f64>,
    /// `(est − true) / true` per pair.
    pub directed: Vec<f64>,
    /// Ordered pairs skipped because their true RTT is 0.
    pub skipped: usize,
}

/// Computes [`PairErrors`] over hosts `0..n` from the true and the estimated RTT.
pub fn pair_errors(
    n: usize,
    truth: impl Fn(usize, usize) -> f64,
    est: impl Fn(usize, usize) -> f64,
) -> PairErrors {
    let mut out = PairErrors::default();
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let t = truth(i, j);
            if t.is_nan() || t <= 0.0 {
                out.skipped += 1;
                continue;
            }
            let d = (est(i, j) - t) / t;
            out.directed.push(d);
            out.relative.push(d.abs());
        }
    }
    out
}

/// Nearest-rank quantile `p ∈ [0, 1]` of already **sorted** values (NaN when empty).
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median, p80, p90 and mean of a set of errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ErrorSummary {
    /// Values summarized.
    pub count: usize,
    /// Values left out (true RTT 0), when summarizing [`PairErrors`].
    pub skipped: usize,
    /// Median (nearest rank).
    pub median: f64,
    /// 80th percentile.
    pub p80: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl ErrorSummary {
    /// Summarizes `values` (NaNs are ignored).
    pub fn of(values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        let mean = if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        };
        Self {
            count: v.len(),
            skipped: 0,
            median: quantile_sorted(&v, 0.5),
            p80: quantile_sorted(&v, 0.8),
            p90: quantile_sorted(&v, 0.9),
            mean,
        }
    }

    /// Summarizes the relative errors of `errors`.
    pub fn of_pairs(errors: &PairErrors) -> Self {
        Self {
            skipped: errors.skipped,
            ..Self::of(&errors.relative)
        }
    }
}

/// The empirical CDF of `values` reduced to at most `points` evenly spaced quantiles
/// `(value, fraction ≤ value)`, for plotting and CSV output of big samples.
pub fn cdf_points(values: &[f64], points: usize) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() || points == 0 {
        return Vec::new();
    }
    let n = v.len();
    let k = points.min(n);
    (1..=k)
        .map(|s| {
            let rank = (s * n).div_ceil(k); // 1-based rank, ends exactly at n
            (v[rank - 1], rank as f64 / n as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_by_hand() {
        // 3 hosts; true RTT 10 everywhere except (0,1) = 0 (skipped); estimate 12.
        let truth = |i: usize, j: usize| if (i, j) == (0, 1) { 0.0 } else { 10.0 };
        let e = pair_errors(3, truth, |_, _| 12.0);
        assert_eq!(e.skipped, 1);
        assert_eq!(e.relative.len(), 5);
        assert!(e.relative.iter().all(|r| (r - 0.2).abs() < 1e-12));
        let e = pair_errors(2, |_, _| 10.0, |_, _| 5.0);
        assert_eq!(e.directed, vec![-0.5, -0.5]);
    }

    #[test]
    fn quantiles_nearest_rank() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile_sorted(&v, 0.5), 5.0);
        assert_eq!(quantile_sorted(&v, 0.8), 8.0);
        assert_eq!(quantile_sorted(&v, 0.81), 9.0);
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 10.0);
        let s = ErrorSummary::of(&[3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!((s.count, s.median, s.mean), (3, 2.0, 2.0));
        assert!(quantile_sorted(&[], 0.5).is_nan());
    }

    #[test]
    fn cdf_points_are_monotone_and_end_at_one() {
        let v: Vec<f64> = (0..1000).map(|i| f64::from((i * 37) % 1000)).collect();
        let c = cdf_points(&v, 50);
        assert_eq!(c.len(), 50);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(c.last(), Some(&(999.0, 1.0)));
        assert_eq!(cdf_points(&[1.0, 2.0], 10), vec![(1.0, 0.5), (2.0, 1.0)]);
    }
}
