//! What a paper claims, what we measured, and the verdict computed from the two.
//!
//! Every experiment declares its papers' claims as [`Claim`]s: the sentence quoted from
//! the paper, where it is, the metric exactly as the paper defines it, and what the paper
//! says about its value ([`Expect`]). A run turns each claim into a [`Check`]: our
//! [`Estimate`] (mean and 95 % confidence interval over seeds, or one exact number) under
//! stated conditions, and a [`Verdict`] computed by [`judge`] — never a fixed sentence.
//!
//! # Verdict rules
//!
//! - **A value** (`Expect::Value`: the paper reports `v`, reproduced within tolerance
//!   `t`, absolute or relative): let `B = [v − t, v + t]` and `[lo, hi]` our 95 % interval
//!   (a single number is its own interval).
//!   - `reproduced` if our mean lies in `B` (so `[lo, hi]` meets it);
//!   - `inconclusive` if `[lo, hi]` meets `B` but the mean lies outside it: the seeds
//!     disagree too much to tell (a wide interval alone must not pass for a
//!     reproduction);
//!   - else `better` / `worse` if the whole interval lies beyond `B` on the side the
//!     claim calls better / worse (higher or lower is better);
//!   - else (no better side: the number is a property, not a goal) `contradicted`.
//! - **A bound** (`Expect::Below(b)` / `Expect::Above(b)`: the paper states the metric is
//!   below / above `b`): `reproduced` if the whole interval is on the stated side,
//!   `contradicted` if the whole interval is on the other side, `inconclusive` if it
//!   straddles `b`.
//!
//! The margin is always ours − paper (or ours − bound), in the metric's unit and, where
//! the paper's number is not zero, relative to it.

use serde::Serialize;

/// How close to a paper's value counts as reproducing it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Tol {
    /// Within ± this many units.
    Abs(f64),
    /// Within ± this fraction of the paper's value.
    Rel(f64),
}

/// Which direction of a value is better for the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Better {
    /// Higher is better.
    Higher,
    /// Lower is better.
    Lower,
    /// Neither: the value describes, it is no goal (missing it contradicts the paper).
    Neither,
}

/// What the paper says about the metric.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Expect {
    /// The paper reports this value.
    Value {
        /// The paper's number, in the claim's unit.
        value: f64,
        /// How close counts as reproduced.
        tol: Tol,
        /// Which side is better.
        better: Better,
    },
    /// The paper states the metric is below this bound.
    Below(f64),
    /// The paper states the metric is above this bound.
    Above(f64),
}

/// A claim of a paper, quoted, located and made measurable.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// Short key, unique within the experiment.
    pub id: &'static str,
    /// Paper file prefix (`000` … `004`), or `brief`/`issue N` for a project target.
    pub paper: &'static str,
    /// Section and figure or table.
    pub location: &'static str,
    /// The paper's sentence(s), verbatim.
    pub quote: &'static str,
    /// The metric as the paper defines it (and how we compute it).
    pub metric: &'static str,
    /// Unit of the metric ("%", "ms", "ratio", …).
    pub unit: &'static str,
    /// What the paper says about it.
    pub expect: Expect,
}

impl Claim {
    /// The paper's side of the comparison as text ("85 %", "< 1").
    pub fn paper_text(&self) -> String {
        let u = unit_suffix(self.unit);
        match self.expect {
            Expect::Value { value, tol, .. } => {
                let t = match tol {
                    Tol::Abs(a) => format!("± {}{u}", num(a)),
                    Tol::Rel(r) => format!("± {}%", num(r * 100.0)),
                };
                format!("{}{u} ({t})", num(value))
            }
            Expect::Below(b) => format!("< {}{u}", num(b)),
            Expect::Above(b) => format!("> {}{u}", num(b)),
        }
    }
}

fn unit_suffix(u: &str) -> String {
    match u {
        "" | "ratio" | "count" => String::new(),
        "%" => "%".into(),
        u => format!(" {u}"),
    }
}

/// A number printed with about four significant digits.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    let d = if a >= 1000.0 || a == 0.0 {
        0
    } else if a >= 100.0 {
        1
    } else if a >= 10.0 {
        2
    } else if a >= 1.0 {
        3
    } else {
        (3.0 - a.log10().floor()) as usize
    }
    .min(8);
    let s = format!("{v:.d$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Our measurement: a mean and its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Mean (or the one value).
    pub mean: f64,
    /// Lower end of the 95 % interval.
    pub lo: f64,
    /// Upper end of the 95 % interval.
    pub hi: f64,
    /// Samples (seeds) behind it; 1 for one deterministic computation.
    pub n: usize,
}

impl Estimate {
    /// One exact number (a deterministic computation, or one run).
    pub fn exact(v: f64) -> Self {
        Self {
            mean: v,
            lo: v,
            hi: v,
            n: 1,
        }
    }

    /// Mean and Student-t 95 % interval of per-seed values (non-finite ones dropped).
    pub fn of(values: &[f64]) -> Self {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let (m, h) = crate::stats::mean_ci95(&v);
        Self {
            mean: m,
            lo: m - h,
            hi: m + h,
            n: v.len(),
        }
    }

    /// Every field times `k` (e.g. fractions to percent).
    pub fn scaled(self, k: f64) -> Self {
        let (a, b) = (self.lo * k, self.hi * k);
        Self {
            mean: self.mean * k,
            lo: a.min(b),
            hi: a.max(b),
            n: self.n,
        }
    }

    /// "12.3 [11.9, 12.7] (n = 5)" or "12.3" for one value.
    pub fn text(&self, unit: &str) -> String {
        let u = unit_suffix(unit);
        if self.n <= 1 || self.lo == self.hi {
            format!("{}{u}", num(self.mean))
        } else {
            format!(
                "{}{u} [{}, {}] (n = {})",
                num(self.mean),
                num(self.lo),
                num(self.hi),
                self.n
            )
        }
    }
}

/// The outcome of holding our estimate against a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Our mean is the paper's value within tolerance, or our interval lies on the stated
    /// side of the paper's bound.
    Reproduced,
    /// Beyond the paper's value on the better side.
    Better,
    /// Beyond the paper's value on the worse side.
    Worse,
    /// On the other side of the paper's bound, or off a descriptive value.
    Contradicted,
    /// The interval straddles the paper's bound, or meets the paper's value's tolerance
    /// band while the mean lies outside it.
    Inconclusive,
}

impl Verdict {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Reproduced => "reproduced",
            Self::Better => "better",
            Self::Worse => "worse",
            Self::Contradicted => "contradicted",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// The verdict on `ours` for `expect` (rules in the module doc).
pub fn judge(expect: Expect, ours: &Estimate) -> Verdict {
    let (lo, hi) = (ours.lo.min(ours.hi), ours.lo.max(ours.hi));
    match expect {
        Expect::Value { value, tol, better } => {
            let t = match tol {
                Tol::Abs(a) => a.abs(),
                Tol::Rel(r) => (r * value).abs(),
            };
            let (b0, b1) = (value - t, value + t);
            if (b0..=b1).contains(&ours.mean) {
                Verdict::Reproduced
            } else if hi >= b0 && lo <= b1 {
                Verdict::Inconclusive
            } else {
                let above = lo > b1;
                match (better, above) {
                    (Better::Higher, true) | (Better::Lower, false) => Verdict::Better,
                    (Better::Higher, false) | (Better::Lower, true) => Verdict::Worse,
                    (Better::Neither, _) => Verdict::Contradicted,
                }
            }
        }
        Expect::Below(b) => {
            if hi < b {
                Verdict::Reproduced
            } else if lo > b {
                Verdict::Contradicted
            } else {
                Verdict::Inconclusive
            }
        }
        Expect::Above(b) => {
            if lo > b {
                Verdict::Reproduced
            } else if hi < b {
                Verdict::Contradicted
            } else {
                Verdict::Inconclusive
            }
        }
    }
}

/// A claim held against our measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The claim.
    pub claim: Claim,
    /// Our number.
    pub ours: Estimate,
    /// Conditions of our measurement (latency data and its median, nodes, seeds, …).
    pub conditions: String,
    /// Computed verdict.
    pub verdict: Verdict,
    /// Why, where the verdict needs explaining (a contradiction's cause).
    pub explanation: Option<String>,
}

impl Check {
    /// Holds `ours` against `claim` under `conditions`.
    pub fn new(claim: Claim, ours: Estimate, conditions: impl Into<String>) -> Self {
        Self {
            verdict: judge(claim.expect, &ours),
            claim,
            ours,
            conditions: conditions.into(),
            explanation: None,
        }
    }

    /// Adds an explanation.
    pub fn explain(mut self, why: impl Into<String>) -> Self {
        self.explanation = Some(why.into());
        self
    }

    /// The paper's reference value or bound.
    pub fn reference(&self) -> f64 {
        match self.claim.expect {
            Expect::Value { value, .. } => value,
            Expect::Below(b) | Expect::Above(b) => b,
        }
    }

    /// "contradicted: ours − bound = +0.21 (+21%)".
    pub fn verdict_text(&self) -> String {
        let r = self.reference();
        let d = self.ours.mean - r;
        let u = unit_suffix(self.claim.unit);
        let rel = if r != 0.0 && self.claim.unit != "%" {
            format!(
                " ({}{}%)",
                if d >= 0.0 { "+" } else { "" },
                num(100.0 * d / r.abs())
            )
        } else {
            String::new()
        };
        let what = match self.claim.expect {
            Expect::Value { .. } => "ours − paper",
            _ => "ours − bound",
        };
        format!(
            "{}: {what} = {}{}{u}{rel}",
            self.verdict.name(),
            if d >= 0.0 { "+" } else { "" },
            num(d)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: f64, tol: Tol, better: Better) -> Expect {
        Expect::Value {
            value: v,
            tol,
            better,
        }
    }

    #[test]
    fn values_are_reproduced_within_tolerance_or_better_or_worse() {
        let e = value(85.0, Tol::Abs(5.0), Better::Higher);
        assert_eq!(judge(e, &Estimate::exact(82.0)), Verdict::Reproduced);
        assert_eq!(judge(e, &Estimate::exact(95.0)), Verdict::Better);
        assert_eq!(judge(e, &Estimate::exact(52.5)), Verdict::Worse);
        // Five seeds' mean and 95 % interval.
        let ci = |mean: f64, lo: f64, hi: f64| Estimate { mean, lo, hi, n: 5 };
        // A mean off the band whose interval meets it cannot tell: 75 [69, 81] against
        // [80, 90] (loadbal's Table 2 with 3 seeds read "reproduced" this way).
        assert_eq!(judge(e, &ci(75.0, 69.0, 81.0)), Verdict::Inconclusive);
        // A mean in the band reproduces, however wide the interval.
        assert_eq!(judge(e, &ci(84.0, 60.0, 108.0)), Verdict::Reproduced);
        // An interval wholly beyond the band is better or worse, not inconclusive.
        let low = ci(70.0, 65.0, 79.9);
        assert_eq!(judge(e, &low), Verdict::Worse);
        let lower = value(24.0, Tol::Rel(0.25), Better::Lower);
        assert_eq!(judge(lower, &Estimate::exact(12.0)), Verdict::Better);
        assert_eq!(judge(lower, &Estimate::exact(40.0)), Verdict::Worse);
        let neither = value(1.0, Tol::Rel(0.1), Better::Neither);
        assert_eq!(judge(neither, &Estimate::exact(1.5)), Verdict::Contradicted);
    }

    #[test]
    fn bounds_are_reproduced_contradicted_or_inconclusive() {
        // Paper 000 Fig. 9: rangedht / dht bandwidth < 1.
        let b = Expect::Below(1.0);
        assert_eq!(
            judge(b, &Estimate::of(&[0.7, 0.8, 0.75, 0.72, 0.78])),
            Verdict::Reproduced
        );
        let ours = Estimate::of(&[1.2, 1.25, 1.18, 1.22, 1.3]);
        assert_eq!(judge(b, &ours), Verdict::Contradicted);
        assert_eq!(
            judge(b, &Estimate::of(&[0.9, 1.1, 0.95, 1.05, 1.0])),
            Verdict::Inconclusive
        );
        assert_eq!(
            judge(Expect::Above(3.0), &Estimate::exact(3.5)),
            Verdict::Reproduced
        );
        assert_eq!(
            judge(Expect::Above(3.0), &Estimate::exact(2.0)),
            Verdict::Contradicted
        );
        let c = Check::new(
            Claim {
                id: "x",
                paper: "000",
                location: "Fig. 9",
                quote: "q",
                metric: "m",
                unit: "ratio",
                expect: b,
            },
            ours,
            "c",
        );
        assert!(
            c.verdict_text().starts_with("contradicted: ours − bound = +0.23"),
            "{}",
            c.verdict_text()
        );
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(num(0.0525), "0.0525");
        assert_eq!(num(1234.6), "1235");
        assert_eq!(num(85.0), "85");
        assert_eq!(num(2.5), "2.5");
        assert_eq!(Estimate::exact(3.0).text("%"), "3%");
    }
}
