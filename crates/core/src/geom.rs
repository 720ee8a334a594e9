//! Geometry: points, axis-aligned boxes and multi-attribute range predicates.
//!
//! In Colyseus (paper `000` §3, "Object Location") every object *publishes* its naming
//! attributes (position, type, …) and *subscribes* with a range predicate over those
//! attributes that describes its area of interest, e.g. `x ∈ [10, 50] ∧ y ∈ [20, 60]`. A
//! publication matches a subscription when every attribute the predicate constrains has a
//! value inside its interval. [`Aabb`] is the common 3-D special case.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in 3-D game space (map units; the model workload uses Quake-like units).
#[derive(
    Clone, Copy, PartialEq, Debug, Default, Serialize, Deserialize, bitcode::Encode, bitcode::Decode,
)]
pub struct Point3 {
    /// x coordinate.
    pub x: f32,
    /// y coordinate.
    pub y: f32,
    /// z coordinate (height).
    pub z: f32,
}

impl Point3 {
    /// The origin.
    pub const ORIGIN: Point3 = Point3 {
        x: 0.0,
        y: 0.0,
        z: 0.0,
    };

    /// Builds a point.
    pub const fn new(x: f32, y: f32, z: f32) -> Self {
        Self { x, y, z }
    }

    /// This point moved along velocity `v` for `t` (units of `v` × `t`): `self + v · t`.
    pub fn moved(self, v: Point3, t: f32) -> Point3 {
        Point3::new(self.x + v.x * t, self.y + v.y * t, self.z + v.z * t)
    }

    /// Euclidean distance to `other`.
    pub fn distance(self, other: Point3) -> f32 {
        let (dx, dy, dz) = (self.x - other.x, self.y - other.y, self.z - other.z);
        (dx * dx + dy * dy + dz * dz).sqrt()
    }

    /// True when every coordinate is finite (not NaN or infinite).
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite() && self.z.is_finite()
    }

    /// Coordinate by attribute index (0 = x, 1 = y, 2 = z).
    pub fn coord(self, axis: usize) -> f32 {
        match axis {
            0 => self.x,
            1 => self.y,
            _ => self.z,
        }
    }
}

impl fmt::Display for Point3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:.1}, {:.1}, {:.1})", self.x, self.y, self.z)
    }
}

/// A closed interval `[lo, hi]` of one attribute.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct Interval {
    /// Lower bound (inclusive).
    pub lo: f32,
    /// Upper bound (inclusive).
    pub hi: f32,
}

impl Interval {
    /// Builds an interval; the bounds are swapped if given in the wrong order.
    pub fn new(a: f32, b: f32) -> Self {
        if a <= b {
            Self { lo: a, hi: b }
        } else {
            Self { lo: b, hi: a }
        }
    }

    /// True if `v` lies inside (bounds included).
    pub fn contains(self, v: f32) -> bool {
        self.lo <= v && v <= self.hi
    }

    /// True if the two intervals share at least one point.
    pub fn overlaps(self, other: Interval) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }

    /// Width `hi - lo`.
    pub fn width(self) -> f32 {
        self.hi - self.lo
    }

    /// True if both bounds are finite and `lo <= hi`.
    pub fn is_valid(self) -> bool {
        self.lo.is_finite() && self.hi.is_finite() && self.lo <= self.hi
    }
}

/// The least gap, relative to the segment's coordinates, at which
/// [`Aabb::segment_entry`] skips the slab test (see [`Aabb::beside`]).
const SLAB_MARGIN: f32 = 1.0 / 4096.0;

/// An axis-aligned box, the usual shape of an area of interest.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct Aabb {
    /// Minimum corner.
    pub min: Point3,
    /// Maximum corner.
    pub max: Point3,
}

impl Aabb {
    /// Builds a box from two opposite corners (in any order).
    pub fn from_corners(a: Point3, b: Point3) -> Self {
        Self {
            min: Point3::new(a.x.min(b.x), a.y.min(b.y), a.z.min(b.z)),
            max: Point3::new(a.x.max(b.x), a.y.max(b.y), a.z.max(b.z)),
        }
    }

    /// The box centred on `c` with half-extents `h`.
    pub fn around(c: Point3, h: Point3) -> Self {
        let lo = Point3::new(c.x - h.x, c.y - h.y, c.z - h.z);
        let hi = Point3::new(c.x + h.x, c.y + h.y, c.z + h.z);
        // Corners strictly in order (positive finite half-extents: every area of interest)
        // are already the minimum and maximum, with no NaN or signed zero for `min`/`max`
        // to settle: skip them (every interest check builds a box this way).
        if lo.x < hi.x && lo.y < hi.y && lo.z < hi.z {
            return Self { min: lo, max: hi };
        }
        Self::from_corners(lo, hi)
    }

    /// True if `p` lies inside (faces included). Inlined: interest checks call it in the
    /// hottest loops of other crates (spelled out per axis, in the order x, y, z).
    #[inline]
    pub fn contains(&self, p: Point3) -> bool {
        self.min.x <= p.x
            && p.x <= self.max.x
            && self.min.y <= p.y
            && p.y <= self.max.y
            && self.min.z <= p.z
            && p.z <= self.max.z
    }

    /// True if the boxes intersect.
    #[inline]
    pub fn intersects(&self, o: &Aabb) -> bool {
        self.min.x <= o.max.x
            && o.min.x <= self.max.x
            && self.min.y <= o.max.y
            && o.min.y <= self.max.y
            && self.min.z <= o.max.z
            && o.min.z <= self.max.z
    }

    /// The smallest box containing both.
    pub fn union(&self, o: &Aabb) -> Aabb {
        Aabb {
            min: Point3::new(
                self.min.x.min(o.min.x),
                self.min.y.min(o.min.y),
                self.min.z.min(o.min.z),
            ),
            max: Point3::new(
                self.max.x.max(o.max.x),
                self.max.y.max(o.max.y),
                self.max.z.max(o.max.z),
            ),
        }
    }

    /// The box grown by `d` on every side (shrunk if negative, never inverted).
    pub fn expand(&self, d: f32) -> Aabb {
        let c = self.center();
        let h = Point3::new(
            ((self.max.x - self.min.x) / 2.0 + d).max(0.0),
            ((self.max.y - self.min.y) / 2.0 + d).max(0.0),
            ((self.max.z - self.min.z) / 2.0 + d).max(0.0),
        );
        Aabb::around(c, h)
    }

    /// The box swept along the displacement `d`: the smallest box containing this box and
    /// this box moved by `d`. An area of interest swept by velocity × lead time is the
    /// predicted interest of paper `000` §6.2. A non-finite `d` leaves the box as it is.
    pub fn swept(&self, d: Point3) -> Aabb {
        if !d.is_finite() {
            return *self;
        }
        let moved = Aabb {
            min: Point3::new(self.min.x + d.x, self.min.y + d.y, self.min.z + d.z),
            max: Point3::new(self.max.x + d.x, self.max.y + d.y, self.max.z + d.z),
        };
        self.union(&moved)
    }

    /// The first point of the segment `a → b` inside the box (faces included), or `None`
    /// if the segment misses it or a coordinate is not finite. A range publication (paper
    /// `000` §3: publications are points or ranges) covers the path `pos → reach`; a
    /// subscriber compares that path with its current interest and learns where the
    /// object will enter it. Slab method: the segment's parameter interval inside every
    /// axis' slab, intersected.
    ///
    /// A segment wholly beyond one of the box's x or y faces, by a margin its rounding
    /// cannot bridge ([`Aabb::beside`]), is answered without the slab test, with the
    /// same answer: a subscriber tests every cached publication against every box of its
    /// interest, most of them far apart, and the slab test was 7 % of the instructions of
    /// a run with the `dht` locator (`crates/sim/PERFORMANCE.md`, eleventh round). Inlined
    /// (it is called from other crates), so that the skip costs no call.
    #[inline]
    pub fn segment_entry(&self, a: Point3, b: Point3) -> Option<Point3> {
        if self.beside(a, b) {
            return None;
        }
        self.slab_entry(a, b)
    }

    /// True if the segment `a → b` lies beyond the box's x or y slab by more than
    /// `SLAB_MARGIN` of the size of its coordinates there, so that the slab test
    /// ([`Aabb::slab_entry`]) answers `None` whatever its rounding.
    ///
    /// Say `p, q < lo − m` on an axis (the other side is the mirror image). If `p = q`,
    /// the slab test compares `p < lo` exactly. Else its parameter where the segment
    /// meets `lo` is `(lo − p) / (q − p)`: above `1 + m / |q − p| ≥ 1 + SLAB_MARGIN` if
    /// `q > p`, negative if `q < p`. Its three roundings move it by a relative 2⁻²⁴
    /// each, far less than `SLAB_MARGIN`, so the segment's interval in that slab stays
    /// empty. (Computing `lo − m` may round up by a relative 2⁻²⁴ of `lo`: that can eat
    /// the margin only where `|lo|` is above 2¹² times `|p| + |q|`, and then the gap is
    /// nearly `|lo|` itself.) Where a coordinate is not finite or the box is invalid the
    /// slab test answers `None` whatever this says; a NaN or infinite end makes this
    /// false (a false comparison, or an infinite margin).
    #[inline]
    fn beside(&self, a: Point3, b: Point3) -> bool {
        let apart = |lo: f32, hi: f32, p: f32, q: f32| {
            let m = (p.abs() + q.abs()) * SLAB_MARGIN + f32::MIN_POSITIVE;
            p.max(q) < lo - m || p.min(q) > hi + m
        };
        apart(self.min.x, self.max.x, a.x, b.x) || apart(self.min.y, self.max.y, a.y, b.y)
    }

    /// [`Aabb::segment_entry`] by the slab test alone.
    fn slab_entry(&self, a: Point3, b: Point3) -> Option<Point3> {
        if !(a.is_finite() && b.is_finite() && self.is_valid()) {
            return None;
        }
        let (mut t0, mut t1) = (0.0f32, 1.0f32);
        for axis in 0..3 {
            let (lo, hi) = (self.min.coord(axis), self.max.coord(axis));
            let (p, d) = (a.coord(axis), b.coord(axis) - a.coord(axis));
            if d == 0.0 {
                if p < lo || p > hi {
                    return None;
                }
                continue;
            }
            let (mut e, mut x) = ((lo - p) / d, (hi - p) / d);
            if e > x {
                std::mem::swap(&mut e, &mut x);
            }
            t0 = t0.max(e);
            t1 = t1.min(x);
            if t0 > t1 {
                return None;
            }
        }
        // Rounding may put the point a hair outside: clamp it onto the box.
        let at = |axis: usize| {
            let v = a.coord(axis) + (b.coord(axis) - a.coord(axis)) * t0;
            v.clamp(self.min.coord(axis), self.max.coord(axis))
        };
        Some(Point3::new(at(0), at(1), at(2)))
    }

    /// Centre point.
    pub fn center(&self) -> Point3 {
        Point3::new(
            (self.min.x + self.max.x) / 2.0,
            (self.min.y + self.max.y) / 2.0,
            (self.min.z + self.max.z) / 2.0,
        )
    }

    /// Volume (area when flat in z is zero; use [`Aabb::area_xy`] for maps).
    pub fn volume(&self) -> f32 {
        (self.max.x - self.min.x) * (self.max.y - self.min.y) * (self.max.z - self.min.z)
    }

    /// Area of the projection on the x-y plane.
    pub fn area_xy(&self) -> f32 {
        (self.max.x - self.min.x) * (self.max.y - self.min.y)
    }

    /// The predicate `x ∈ [..] ∧ y ∈ [..] ∧ z ∈ [..]` equivalent to this box.
    pub fn to_predicate(&self) -> RangePredicate {
        RangePredicate {
            ranges: (0..3)
                .map(|a| (Attr(a as u8), Interval::new(self.min.coord(a), self.max.coord(a))))
                .collect(),
        }
    }

    /// True if all coordinates are finite and `min <= max` on every axis.
    pub fn is_valid(&self) -> bool {
        self.min.is_finite() && self.max.is_finite() && (0..3).all(|a| self.min.coord(a) <= self.max.coord(a))
    }
}

/// A naming attribute: 0, 1, 2 are the coordinates x, y, z; games may define more
/// (object type, team, …) from 3 on.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
)]
pub struct Attr(pub u8);

impl Attr {
    /// The x coordinate.
    pub const X: Attr = Attr(0);
    /// The y coordinate.
    pub const Y: Attr = Attr(1);
    /// The z coordinate.
    pub const Z: Attr = Attr(2);
}

/// A multi-attribute range predicate (a Colyseus subscription): a conjunction of
/// intervals, one per constrained attribute. Attributes it does not mention are
/// unconstrained.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct RangePredicate {
    /// The constrained attributes and their intervals.
    pub ranges: Vec<(Attr, Interval)>,
}

impl RangePredicate {
    /// The interval constraining `attr`, if any.
    pub fn range(&self, attr: Attr) -> Option<Interval> {
        self.ranges.iter().find(|(a, _)| *a == attr).map(|(_, i)| *i)
    }

    /// True if the publication `values` (attribute, value pairs) satisfies every
    /// constrained attribute. A constrained attribute missing from the publication fails.
    pub fn matches(&self, values: &[(Attr, f32)]) -> bool {
        self.ranges.iter().all(|(a, iv)| {
            values
                .iter()
                .find(|(b, _)| b == a)
                .is_some_and(|(_, v)| iv.contains(*v))
        })
    }

    /// True if `p` satisfies the x, y, z constraints (other attributes are ignored).
    pub fn matches_point(&self, p: Point3) -> bool {
        self.ranges
            .iter()
            .filter(|(a, _)| a.0 < 3)
            .all(|(a, iv)| iv.contains(p.coord(a.0 as usize)))
    }

    /// True if every interval is finite and ordered.
    pub fn is_valid(&self) -> bool {
        self.ranges.iter().all(|(_, iv)| iv.is_valid())
    }
}

/// `v.floor() as i32`, without a call: on the baseline x86-64 target `f32::floor` is a
/// library function (no SSE4.1 `roundss`), and the grids of the simulator and of the model
/// game compute a cell this way for every lookup (1.3 % of the default simulation's
/// instructions went to `floorf`). Same result for every input, NaN and infinities
/// included (`as` saturates; NaN gives 0).
#[inline]
pub fn floor_i32(v: f32) -> i32 {
    let t = v as i32;
    // `t` truncates toward zero: one below for a negative value with a fraction. Where the
    // cast saturated (|v| ≥ 2³¹) `t as f32` is not above `v` unless `v` is −∞ or below
    // `i32::MIN`, where `t` already is `i32::MIN`.
    if (t as f32) > v { t.saturating_sub(1) } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_entry_is_where_the_path_first_meets_the_box() {
        let b = Aabb::from_corners(Point3::new(10.0, 10.0, -1.0), Point3::new(20.0, 20.0, 1.0));
        let p = |x, y| Point3::new(x, y, 0.0);
        // Entering through the left face, and leaving again: the first point counts.
        assert_eq!(b.segment_entry(p(0.0, 15.0), p(30.0, 15.0)), Some(p(10.0, 15.0)));
        // Starting inside: the start itself.
        assert_eq!(b.segment_entry(p(12.0, 13.0), p(90.0, 90.0)), Some(p(12.0, 13.0)));
        // Diagonal through a corner region: enters where both slabs overlap.
        assert_eq!(b.segment_entry(p(0.0, 5.0), p(20.0, 25.0)), Some(p(10.0, 15.0)));
        // Too short, beside, parallel outside, degenerate point outside / inside.
        assert_eq!(b.segment_entry(p(0.0, 15.0), p(9.0, 15.0)), None);
        assert_eq!(b.segment_entry(p(0.0, 0.0), p(30.0, 5.0)), None);
        assert_eq!(b.segment_entry(p(0.0, 25.0), p(30.0, 25.0)), None);
        assert_eq!(b.segment_entry(p(5.0, 5.0), p(5.0, 5.0)), None);
        assert_eq!(b.segment_entry(p(15.0, 15.0), p(15.0, 15.0)), Some(p(15.0, 15.0)));
        assert_eq!(b.segment_entry(p(f32::NAN, 15.0), p(15.0, 15.0)), None);
        // Brute force along the segment agrees on hits and misses.
        let mut rng = crate::DetRng::new(7);
        for _ in 0..2000 {
            let mut q = || p(rng.range_f64(0.0, 30.0) as f32, rng.range_f64(0.0, 30.0) as f32);
            let (a, c) = (q(), q());
            let first = (0..=1000)
                .map(|i| i as f32 / 1000.0)
                .find(|t| b.contains(p(a.x + (c.x - a.x) * t, a.y + (c.y - a.y) * t)));
            match (b.segment_entry(a, c), first) {
                (Some(e), Some(t)) => {
                    assert!(b.contains(e));
                    let at = p(a.x + (c.x - a.x) * t, a.y + (c.y - a.y) * t);
                    assert!(e.distance(at) <= 0.05, "{a:?}->{c:?}: {e:?} vs sampled {at:?}");
                }
                (None, None) | (Some(_), None) => {}
                (None, Some(t)) => panic!("{a:?}->{c:?} misses, but t = {t} is inside"),
            }
        }
    }

    /// `segment_entry` skips the slab test only where the slab test says `None`: random
    /// boxes and segments at several scales, with endpoints a few ulps, or about the
    /// margin, beyond a face, where the slab test's rounding decides. The run must meet
    /// both sides: skips, and segments strictly outside a face that the slab test still
    /// accepts (its rounding), which a skip without a margin would have answered wrongly.
    #[test]
    fn skipping_the_slab_test_never_changes_the_answer() {
        // A coordinate near a face of `[lo, hi]`: ulps beyond it, about the margin beyond
        // it, up to `scale` beyond it, or anywhere.
        fn near(rng: &mut crate::DetRng, scale: f32, lo: f32, hi: f32) -> f32 {
            let face = if rng.chance(0.5) { lo } else { hi };
            let out = if face == lo { -1.0f32 } else { 1.0 };
            match rng.below(4) {
                0 => {
                    let mut x = face;
                    for _ in 0..rng.below(6) {
                        x = if out < 0.0 { x.next_down() } else { x.next_up() };
                    }
                    x
                }
                1 => {
                    let m = (2.0 * face.abs()) * SLAB_MARGIN;
                    face + out * m * rng.range_f64(0.5, 1.5) as f32
                }
                2 => face + out * rng.range_f64(0.0, f64::from(scale)) as f32,
                _ => rng.range_f64(f64::from(-2.0 * scale), f64::from(2.0 * scale)) as f32,
            }
        }
        let mut rng = crate::DetRng::new(11);
        let (mut skipped, mut rounded_in) = (0u32, 0u32);
        for case in 0..200_000u32 {
            let scale = [1e-3f32, 1.0, 300.0, 1e4, 1e7][case as usize % 5];
            let mut v = |lo: f32, hi: f32| rng.range_f64(f64::from(lo), f64::from(hi)) as f32;
            let (x0, x1) = (v(-scale, scale), v(-scale, scale));
            let (y0, y1) = (v(-scale, scale), v(-scale, scale));
            let b = Aabb::from_corners(Point3::new(x0, y0, -1.0), Point3::new(x1, y1, 1.0));
            let end = |rng: &mut crate::DetRng| {
                let x = near(rng, scale, b.min.x, b.max.x);
                Point3::new(x, near(rng, scale, b.min.y, b.max.y), 0.0)
            };
            let a = end(&mut rng);
            let c = if rng.chance(0.2) { a } else { end(&mut rng) };
            let slab = b.slab_entry(a, c);
            assert_eq!(b.segment_entry(a, c), slab, "box {b:?}, segment {a:?} -> {c:?}");
            skipped += u32::from(b.beside(a, c));
            let outside = |lo: f32, hi: f32, p: f32, q: f32| p.max(q) < lo || p.min(q) > hi;
            if slab.is_some() && (outside(b.min.x, b.max.x, a.x, c.x) || outside(b.min.y, b.max.y, a.y, c.y))
            {
                rounded_in += 1;
            }
        }
        assert!(skipped > 20_000, "skips: {skipped}");
        assert!(
            rounded_in > 0,
            "no segment strictly outside was accepted by the slab test"
        );
    }

    #[test]
    fn swept_box_covers_both_ends_and_only_the_sweep() {
        let b = Aabb::around(Point3::new(0.0, 0.0, 0.0), Point3::new(1.0, 1.0, 1.0));
        let s = b.swept(Point3::new(5.0, -2.0, 0.0));
        // Both the start and the end box are inside.
        assert!(s.contains(Point3::new(-1.0, 1.0, 0.0)));
        assert!(s.contains(Point3::new(6.0, -3.0, 0.0)));
        // Nothing beyond the sweep in its direction, nor behind the start.
        assert!(!s.contains(Point3::new(6.5, 0.0, 0.0)));
        assert!(!s.contains(Point3::new(-1.5, 0.0, 0.0)));
        assert!(!s.contains(Point3::new(0.0, 1.5, 0.0)));
        assert!(!s.contains(Point3::new(0.0, -3.5, 0.0)));
        assert_eq!(b.swept(Point3::new(f32::NAN, 0.0, 0.0)), b);
    }

    #[test]
    fn box_contains_and_intersects() {
        let b = Aabb::from_corners(Point3::new(10.0, 0.0, 0.0), Point3::new(0.0, 10.0, 10.0));
        assert!(b.contains(Point3::new(0.0, 5.0, 10.0)));
        assert!(!b.contains(Point3::new(-0.1, 5.0, 5.0)));
        let c = Aabb::around(Point3::new(12.0, 5.0, 5.0), Point3::new(2.0, 1.0, 1.0));
        assert!(b.intersects(&c));
        let d = Aabb::around(Point3::new(12.1, 5.0, 5.0), Point3::new(2.0, 1.0, 1.0));
        assert!(!b.intersects(&d));
        assert_eq!(b.union(&d).max.x, 14.1);
        assert_eq!(b.expand(1.0).min.x, -1.0);
        assert_eq!(b.expand(-100.0).volume(), 0.0);
    }

    /// The per-axis spelling of `contains` and `intersects` answers as the axis loop it
    /// replaced, faces, NaN and infinities included.
    #[test]
    fn contains_and_intersects_answer_as_the_axis_loop() {
        let values = [
            f32::NAN,
            f32::NEG_INFINITY,
            -10.0,
            -0.0,
            0.0,
            0.5,
            1.0,
            3.0,
            f32::INFINITY,
        ];
        let mut rng = crate::DetRng::new(9);
        let mut pick = || values[rng.index(values.len())];
        for _ in 0..20_000 {
            let a = Aabb {
                min: Point3::new(pick(), pick(), pick()),
                max: Point3::new(pick(), pick(), pick()),
            };
            let o = Aabb {
                min: Point3::new(pick(), pick(), pick()),
                max: Point3::new(pick(), pick(), pick()),
            };
            let p = Point3::new(pick(), pick(), pick());
            let inside = (0..3).all(|k| a.min.coord(k) <= p.coord(k) && p.coord(k) <= a.max.coord(k));
            let meets = (0..3).all(|k| a.min.coord(k) <= o.max.coord(k) && o.min.coord(k) <= a.max.coord(k));
            assert_eq!(a.contains(p), inside, "{a:?} {p:?}");
            assert_eq!(a.intersects(&o), meets, "{a:?} {o:?}");
        }
    }

    #[test]
    fn predicate_matches_conjunction() {
        let p = Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(10.0, 10.0, 1.0)).to_predicate();
        assert!(p.matches(&[(Attr::X, 1.0), (Attr::Y, 10.0), (Attr::Z, 0.5), (Attr(7), 99.0)]));
        assert!(!p.matches(&[(Attr::X, 1.0), (Attr::Y, 10.5), (Attr::Z, 0.5)]));
        assert!(
            !p.matches(&[(Attr::X, 1.0), (Attr::Y, 1.0)]),
            "missing z must fail"
        );
        assert!(p.matches_point(Point3::new(5.0, 5.0, 1.0)));
        let typed = RangePredicate {
            ranges: vec![(Attr(3), Interval::new(2.0, 2.0))],
        };
        assert!(typed.matches(&[(Attr(3), 2.0)]));
        assert!(!typed.matches(&[(Attr(3), 1.0)]));
        assert!(
            !RangePredicate {
                ranges: vec![(
                    Attr::X,
                    Interval {
                        lo: f32::NAN,
                        hi: 1.0
                    }
                )]
            }
            .is_valid()
        );
    }

    #[test]
    fn floor_i32_is_floor_then_cast_at_the_edges() {
        let edges = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            -1.0,
            -1.000_000_1,
            8_388_607.5,
            -8_388_607.5,
            16_777_217.0,
            2_147_483_520.0,
            2_147_483_648.0,
            -2_147_483_648.0,
            -2_147_483_904.0,
            3e9,
            -3e9,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            -1e-45,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        for v in edges {
            assert_eq!(floor_i32(v), v.floor() as i32, "{v}");
        }
    }

    proptest::proptest! {
        /// `around` is `from_corners` of its two corners, bit for bit: NaNs, infinities,
        /// signed zeros and negative half-extents included.
        #[test]
        fn around_is_from_corners(c in proptest::array::uniform3(proptest::prelude::any::<u32>()),
                                  h in proptest::array::uniform3(proptest::prelude::any::<u32>()),
                                  small in proptest::array::uniform6(-4i8..4)) {
            let f = |b: u32| f32::from_bits(b);
            let cases = [
                (Point3::new(f(c[0]), f(c[1]), f(c[2])), Point3::new(f(h[0]), f(h[1]), f(h[2]))),
                (
                    Point3::new(f32::from(small[0]), f32::from(small[1]), f32::from(small[2]) * 0.0),
                    Point3::new(f32::from(small[3]), f32::from(small[4]).abs(), f32::from(small[5]) * -0.0),
                ),
            ];
            for (c, h) in cases {
                let a = Aabb::around(c, h);
                let b = Aabb::from_corners(
                    Point3::new(c.x - h.x, c.y - h.y, c.z - h.z),
                    Point3::new(c.x + h.x, c.y + h.y, c.z + h.z),
                );
                let bits = |b: &Aabb| [b.min.x, b.min.y, b.min.z, b.max.x, b.max.y, b.max.z].map(f32::to_bits);
                proptest::prop_assert_eq!(bits(&a), bits(&b), "{:?} {:?}", c, h);
            }
        }

        #[test]
        fn floor_i32_is_floor_then_cast(bits in proptest::prelude::any::<u32>(), q in -1e7f32..1e7) {
            let v = f32::from_bits(bits);
            proptest::prop_assert_eq!(floor_i32(v), v.floor() as i32, "{}", v);
            proptest::prop_assert_eq!(floor_i32(q), q.floor() as i32, "{}", q);
            proptest::prop_assert_eq!(floor_i32(q / 512.0), (q / 512.0).floor() as i32, "{}", q);
        }
    }
}
