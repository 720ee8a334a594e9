//! Area-of-interest rules: `A(i, j)` of paper `004` §5.2, "one if cell j is within the
//! AoI of cell i, zero otherwise". The rule is applied between cell centres.
//!
//! Every rule here is symmetric (`A(i, j) = A(j, i)`), which the half-matrix storage of
//! visibility relies on.

use crate::error::LoadModelError;

/// An area-of-interest rule between two positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AoiRule {
    /// No AoI limit: everything visible is of interest (the paper's Torque case study:
    /// "does not define a discrete AoI").
    Unlimited,
    /// Euclidean distance between centres at most `r`.
    Radius(f64),
    /// A box of half-extents `(hx, hy)` centred on the observer (`|dx| ≤ hx ∧ |dy| ≤
    /// hy`), the shape of the model game's areas of interest.
    Box(f64, f64),
}

impl AoiRule {
    /// `A`: true if a position offset by `(dx, dy)` from the observer is of interest.
    pub fn contains(&self, dx: f64, dy: f64) -> bool {
        match *self {
            AoiRule::Unlimited => true,
            AoiRule::Radius(r) => dx * dx + dy * dy <= r * r,
            AoiRule::Box(hx, hy) => dx.abs() <= hx && dy.abs() <= hy,
        }
    }

    /// The largest distance at which `contains` can hold (`None`: unbounded). Visibility
    /// maps are limited to it (§3.1: "the maximal length of that line-of-sight may be
    /// restricted to the largest AoI used in the system").
    pub fn max_range(&self) -> Option<f64> {
        match *self {
            AoiRule::Unlimited => None,
            AoiRule::Radius(r) => Some(r),
            AoiRule::Box(hx, hy) => Some(hx.hypot(hy)),
        }
    }

    /// Parses `none`, `radius:R` or `box:H` / `box:HXxHY` (half-extents).
    pub fn parse(s: &str) -> Result<Self, LoadModelError> {
        let bad = |why: &str| LoadModelError::spec(s, why);
        let num = |t: &str| -> Result<f64, LoadModelError> {
            match t.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                _ => Err(bad("sizes must be positive numbers")),
            }
        };
        match s.split_once(':') {
            None if s == "none" || s == "unlimited" => Ok(AoiRule::Unlimited),
            Some(("radius", r)) => Ok(AoiRule::Radius(num(r)?)),
            Some(("box", b)) => match b.split_once(['x', 'X']) {
                Some((hx, hy)) => Ok(AoiRule::Box(num(hx)?, num(hy)?)),
                None => {
                    let h = num(b)?;
                    Ok(AoiRule::Box(h, h))
                }
            },
            _ => Err(bad(
                "expected none, radius:R, box:H or box:HXxHY (half-extents in world units)",
            )),
        }
    }
}

impl std::fmt::Display for AoiRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AoiRule::Unlimited => write!(f, "none"),
            AoiRule::Radius(r) => write!(f, "radius:{r}"),
            AoiRule::Box(hx, hy) if hx == hy => write!(f, "box:{hx}"),
            AoiRule::Box(hx, hy) => write!(f, "box:{hx}x{hy}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_ranges() {
        let b = AoiRule::parse("box:400").unwrap();
        assert_eq!(b, AoiRule::Box(400.0, 400.0));
        assert!(b.contains(400.0, -400.0) && !b.contains(400.1, 0.0));
        assert!((b.max_range().unwrap() - 565.685).abs() < 1e-3);
        let r = AoiRule::parse("radius:5").unwrap();
        assert!(r.contains(3.0, 4.0) && !r.contains(3.0, 4.01));
        assert_eq!(AoiRule::parse("none").unwrap().max_range(), None);
        assert_eq!(AoiRule::parse("box:3x4").unwrap(), AoiRule::Box(3.0, 4.0));
        for bad in ["box:", "radius:-1", "circle:3", "box:axb"] {
            assert!(AoiRule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            AoiRule::parse(&AoiRule::Box(3.0, 4.0).to_string()).unwrap(),
            AoiRule::Box(3.0, 4.0)
        );
    }
}
