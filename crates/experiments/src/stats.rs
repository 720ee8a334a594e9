//! Small statistics for experiment summaries: means with Student-t 95 % confidence
//! intervals, quantiles, and running work over seeds on several threads with results
//! that do not depend on the thread count.

use crate::ExperimentError;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Two-sided 97.5 % quantiles of Student's t for 1 … 30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// Mean and half-width of the 95 % confidence interval of the mean (Student t, sample
/// standard deviation). One value: half-width 0. None: (NaN, NaN).
pub fn mean_ci95(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T975.get(n - 2).copied().unwrap_or(1.96);
    (m, t * (var / n as f64).sqrt())
}

/// Mean (NaN for none).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Nearest-rank `q`-quantile (NaN for none).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let k = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[k]
}

/// Runs `f` on every item on up to `threads` threads and returns the results in item
/// order — the same results whatever the thread count, as long as `f` depends only on its
/// item. The first error (in item order) is returned.
pub fn parallel<T: Sync, R: Send>(
    threads: usize,
    items: &[T],
    f: impl Fn(&T) -> Result<R, ExperimentError> + Sync,
) -> Result<Vec<R>, ExperimentError> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<R, ExperimentError>>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(ExperimentError::Run("a worker thread panicked".into())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_samples() {
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(m, 3.0);
        // sd = 1.5811, se = 0.7071, t(4) = 2.776.
        assert!((h - 2.776 * std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6, "{h}");
        assert_eq!(mean_ci95(&[7.0]), (7.0, 0.0));
        assert_eq!(quantile(&[3.0, 1.0, 2.0, 4.0], 0.5), 2.0);
    }

    #[test]
    fn parallel_results_do_not_depend_on_threads() {
        let items: Vec<u64> = (0..23).collect();
        let f = |x: &u64| -> Result<u64, ExperimentError> { Ok(x * x + 1) };
        let one = parallel(1, &items, f).unwrap();
        let four = parallel(4, &items, f).unwrap();
        assert_eq!(one, four);
        assert_eq!(one[5], 26);
        let err = parallel(2, &items, |x: &u64| {
            if *x == 7 {
                Err(ExperimentError::Run("seven".into()))
            } else {
                Ok(*x)
            }
        });
        assert!(matches!(err, Err(ExperimentError::Run(m)) if m == "seven"));
    }
}
