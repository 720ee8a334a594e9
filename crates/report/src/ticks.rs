//! Axis ticks and their labels: "nice" steps (1, 2, 5 × 10ᵏ) on linear axes, whole
//! numbers only on integer axes, decades on logarithmic axes, and labels printed with just
//! the decimals the step needs ("1", "2.5", "0.01" — never "1.0" or "1000.0").

/// Tick positions of an axis and how to print them.
#[derive(Clone, Debug, PartialEq)]
pub struct Ticks {
    /// Positions of the labelled ticks (bold grid lines), increasing.
    pub major: Vec<f64>,
    /// Positions of unlabelled minor grid lines (log axes: 2…9 × 10ᵏ).
    pub minor: Vec<f64>,
    /// Decimals printed on linear axes (`None` on log axes).
    pub decimals: Option<usize>,
    /// Log axes: print every label as a power of ten (when any needs to be one).
    pub powers: bool,
}

impl Ticks {
    /// The label of tick `v`.
    pub fn label(&self, v: f64) -> String {
        match self.decimals {
            Some(d) => {
                let s = fmt_fixed(v, d);
                if s.contains('.') {
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    s
                }
            }
            None if self.powers => fmt_pow(v),
            None => fmt_log(v),
        }
    }
}

/// A number with `d` decimals, without "-0".
pub fn fmt_fixed(v: f64, d: usize) -> String {
    let s = format!("{v:.d$}");
    if s.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// A decade label: plain digits from 0.0001 to 100000, `10⁻⁵`-style powers beyond;
/// 2 × and 5 × decades (used when the axis spans few decades) the same way.
pub fn fmt_log(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let k = v.log10().floor() as i32;
    let mant = (v / 10f64.powi(k)).round();
    if (-4..=5).contains(&k) {
        let d = if k < 0 { (-k) as usize } else { 0 };
        return fmt_fixed(mant * 10f64.powi(k), d);
    }
    fmt_pow(v)
}

/// A label as a power of ten: `10³`, `2×10⁻⁵`.
pub fn fmt_pow(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let k = v.log10().floor() as i32;
    let mant = (v / 10f64.powi(k)).round();
    let sup: String = k
        .to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            _ => '⁹',
        })
        .collect();
    if mant == 1.0 {
        format!("10{sup}")
    } else {
        format!("{mant}×10{sup}")
    }
}

/// Ticks of a linear axis over `[lo, hi]`: at most `max_n` labelled ticks at a nice step,
/// a step of at least 1 on an `integer` axis.
pub fn linear(lo: f64, hi: f64, max_n: usize, integer: bool) -> Ticks {
    let max_n = max_n.max(2);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let raw = span / (max_n - 1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= (max_n - 1) as f64 + 1e-9)
        .unwrap_or(10.0 * mag);
    if integer {
        step = step.max(1.0).round();
        // Keep integer steps nice: 1, 2, 5, 10, 20, 25, 50, …
        if step > 1.0 {
            let m = 10f64.powf(step.log10().floor());
            let f = step / m;
            let nice: &[f64] = if m < 10.0 {
                &[1.0, 2.0, 5.0, 10.0]
            } else {
                &[1.0, 2.0, 2.5, 5.0, 10.0]
            };
            let f = nice.iter().copied().find(|x| *x >= f - 1e-9).unwrap_or(10.0);
            step = (f * m).round().max(1.0);
        }
    }
    let first = (lo / step - 1e-9).ceil() * step;
    let mut major = Vec::new();
    let mut v = first;
    while v <= hi + step * 1e-9 && major.len() < 1000 {
        major.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    let decimals = if integer || step >= 1.0 && (step - step.round()).abs() < 1e-9 {
        0
    } else {
        // Enough decimals that every tick prints exactly (2.5 needs 1, 0.25 needs 2).
        (0..=10)
            .find(|d| {
                let p = 10f64.powi(*d as i32);
                ((step * p) - (step * p).round()).abs() < 1e-6 * p.max(1.0)
            })
            .unwrap_or(6)
    };
    Ticks {
        major,
        minor: Vec::new(),
        decimals: Some(decimals),
        powers: false,
    }
}

/// Ticks of a base-10 log axis over `[lo, hi]` (both > 0): under a decade, nice linear
/// steps; else every decade, thinned to at most `max_n` labels, and with fewer than three
/// decades also 2 × and 5 × (a decade always holds three of those). Minor ticks at 2…9 × every
/// decade.
pub fn log(lo: f64, hi: f64, max_n: usize) -> Ticks {
    let (lo, hi) = (lo.max(f64::MIN_POSITIVE), hi.max(lo * 1.0001));
    if hi / lo < 10.0 {
        // Less than a decade (8 and 16 nodes, 20–115 s): decades and their multiples would
        // leave most data unlabelled (16 between 10 and 20), so label nice linear steps.
        let mut t = linear(lo, hi, max_n, false);
        t.major.retain(|v| *v > 0.0 && *v >= lo && *v <= hi);
        if t.major.len() >= 2 {
            return t;
        }
    }
    let (k0, k1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let decades: Vec<i32> = (k0..=k1).collect();
    let mut major: Vec<f64> = decades
        .iter()
        .map(|k| 10f64.powi(*k))
        .filter(|v| inside(*v))
        .collect();
    if major.len() < 3 {
        major = decades
            .iter()
            .flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(*k)))
            .filter(|v| inside(*v))
            .collect();
    }
    let max_n = max_n.max(2);
    if major.len() > max_n {
        let every = major.len().div_ceil(max_n);
        major = major.into_iter().step_by(every).collect();
    }
    let minor = decades
        .iter()
        .flat_map(|k| (2..10).map(move |m| f64::from(m) * 10f64.powi(*k)))
        .filter(|v| inside(*v))
        .collect();
    let powers = major.iter().any(|v| !(1e-4 * 0.999..1e6).contains(v));
    Ticks {
        major,
        minor,
        decimals: None,
        powers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &Ticks) -> Vec<String> {
        t.major.iter().map(|v| t.label(*v)).collect()
    }

    #[test]
    fn integer_axes_print_whole_numbers() {
        let t = linear(1.0, 10.0, 8, true);
        assert_eq!(labels(&t), ["2", "4", "6", "8", "10"]);
        let t = linear(0.0, 3.0, 8, true);
        assert_eq!(
            labels(&t),
            ["0", "1", "2", "3"],
            "no 0.5 steps on an integer axis"
        );
    }

    #[test]
    fn fractional_steps_get_just_enough_decimals() {
        assert_eq!(
            labels(&linear(0.0, 1.0, 6, false)),
            ["0", "0.2", "0.4", "0.6", "0.8", "1"]
        );
        let t = linear(0.0, 0.05, 6, false);
        assert_eq!(t.decimals, Some(2));
        assert_eq!(
            labels(&linear(-1.0, 1.0, 5, false)),
            ["-1", "-0.5", "0", "0.5", "1"]
        );
    }

    #[test]
    fn log_axes_label_each_decade_once() {
        let t = log(1.0, 10_000.0, 8);
        assert_eq!(labels(&t), ["1", "10", "100", "1000", "10000"]);
        let t = log(0.001, 1e7, 6);
        let l = labels(&t);
        assert!(l.len() <= 6, "{l:?}");
        let mut d = l.clone();
        d.dedup();
        assert_eq!(d, l, "no label twice");
        assert_eq!(fmt_log(1e-6), "10⁻⁶");
        let t = log(1e-14, 1e-3, 8);
        assert!(
            labels(&t).iter().all(|l| l.starts_with("10")),
            "one style per axis: {:?}",
            labels(&t)
        );
        assert_eq!(fmt_log(2e7), "2×10⁷");
        // Narrow ranges get 2 × and 5 × ticks so the axis is not left unlabelled.
        assert_eq!(labels(&log(3.0, 60.0, 8)), ["5", "10", "20", "50"]);
        // Under a decade (8 and 16 nodes, padded): nice linear steps, so 16 is labelled
        // too, not "8", "9", "10" alone.
        assert_eq!(labels(&log(7.1, 17.9, 9)), ["8", "10", "12", "14", "16"]);
        // Vivaldi's 22–120 s is not labelled at 50 and 100 only.
        assert_eq!(labels(&log(22.0, 120.0, 6)), ["40", "60", "80", "100", "120"]);
        assert_eq!(
            labels(&log(0.09, 0.7, 8)),
            ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"]
        );
        // A decade or more holds at least three of 1, 2 and 5 times the decades.
        assert_eq!(labels(&log(55.0, 600.0, 6)), ["100", "200", "500"]);
        assert_eq!(labels(&log(12.0, 150.0, 9)), ["20", "50", "100"]);
    }
}
