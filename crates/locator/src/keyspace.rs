//! The key space of the overlay ring and the two keyings of game space (paper `000` §3
//! "Object location", §6.1).
//!
//! Keys are `u64` on a ring. A node at position `p` whose predecessor sits at `q` owns the
//! half-open arc `(q, p]` (the successor convention of Chord and Mercury's contiguous
//! ranges). Two keyings map game space to keys:
//!
//! - [`Keying::RangeDht`]: the key is one naming attribute ([`RangeKey`]): `x` (the
//!   default) or `y`, mapped monotonically onto the ring, so a subscription's interval on
//!   that axis is one contiguous key range (Mercury's attribute hub for that attribute);
//!   or the position linearised by a Hilbert curve ([`crate::hilbert`]), so a subscription
//!   box is a few key ranges ([`Keyer::ranges`]);
//! - [`Keying::Dht`]: the map is cut into a grid of regions; each region is hashed to a
//!   pseudo-random key, and a subscription becomes one lookup per region it overlaps.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use worldmesh_core::{Aabb, Point3};

use crate::hilbert::{self, CellBox};

/// A position on the ring.
pub type Key = u64;

/// Clockwise distance from `a` to `b` on the ring.
pub fn cw(a: Key, b: Key) -> u64 {
    b.wrapping_sub(a)
}

/// True if `k` lies in the arc `(lo, hi]` walking clockwise; `lo == hi` is the whole ring.
pub fn in_arc(k: Key, lo: Key, hi: Key) -> bool {
    lo == hi || (cw(lo, k) != 0 && cw(lo, k) <= cw(lo, hi))
}

/// True if the key interval `[a, b]` (clockwise, inclusive) shares a key with the arc
/// `(lo, hi]`: it starts inside the arc, or it runs through the arc's first key `lo + 1`.
/// (Until issue 4's range keys this tested "runs through `hi`", which missed an interval
/// starting before the arc and ending inside it: at a join split such a subscription
/// stayed with the contact instead of moving to the joiner, which then missed matches
/// until the subscriber's next refresh.)
pub fn reaches(a: Key, b: Key, lo: Key, hi: Key) -> bool {
    in_arc(a, lo, hi) || cw(a, lo.wrapping_add(1)) <= cw(a, b)
}

/// A split of a node's arc `(lo, end]` at `mid` hands `(lo, mid]` to a joiner. For a
/// stored subscription with key ranges `ranges` (all of its box's, recomputed): the range
/// its moved copy claims (the first one sharing a key with the handed arc), if it moves
/// at all, and whether the node keeps its own copy (some range shares a key with the kept
/// arc `(mid, end]`, or none touches the handed arc: a copy we hold for a reason this
/// split does not change).
pub fn split_ranges(ranges: &[(Key, Key)], lo: Key, mid: Key, end: Key) -> (Option<(Key, Key)>, bool) {
    let moved = ranges.iter().copied().find(|&(a, b)| reaches(a, b, lo, mid));
    let kept = mid != end && ranges.iter().any(|&(a, b)| reaches(a, b, mid, end));
    (moved, moved.is_none() || kept)
}

/// SplitMix64 finaliser: a fixed, well-mixed hash used to scatter `dht` regions.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Which keying of game space the overlay uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Keying {
    /// Range-queriable DHT keyed by `x` (paper §6.1 `rangedht`).
    RangeDht,
    /// Hashed DHT over map regions (paper §6.1 `dht`).
    Dht,
}

/// The naming attribute a `rangedht` key is made of (issue 4: "the key is one naming
/// attribute (configurable; `x` by default, or a linearized key from a space-filling
/// curve)", paper `000` §3 "Object location", §6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RangeKey {
    /// The `x` coordinate: a box is one key interval, nodes own vertical strips.
    #[default]
    X,
    /// The `y` coordinate (the mirror of `X`): nodes own horizontal strips.
    Y,
    /// The position on a Hilbert curve of order 32 over the map bounds: nodes own compact
    /// patches, a box is a few key intervals ([`crate::hilbert`]).
    Hilbert,
}

impl RangeKey {
    /// Every choice, in the order of [`RangeKey::NAMES`].
    pub const ALL: [RangeKey; 3] = [RangeKey::X, RangeKey::Y, RangeKey::Hilbert];
    /// The names accepted in configs and on the command line.
    pub const NAMES: [&'static str; 3] = ["x", "y", "hilbert"];

    /// The name used in configs.
    pub fn name(self) -> &'static str {
        match self {
            RangeKey::X => "x",
            RangeKey::Y => "y",
            RangeKey::Hilbert => "hilbert",
        }
    }
}

impl fmt::Display for RangeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown [`RangeKey`] name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("range key `{0}` is not available; valid: x, y, hilbert")]
pub struct UnknownRangeKey(pub String);

impl FromStr for RangeKey {
    type Err = UnknownRangeKey;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RangeKey::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownRangeKey(s.to_string()))
    }
}

/// Default interval budget of a Hilbert-keyed box (see [`Keyer::ranges`]). Measured on
/// the default simulation (64-fed-rect, 60 s, seed 1, `worldmesh simulate --config F`
/// with `range_key = "hilbert"` and `max_sub_ranges` = 1 / 2 / 4 / 8 / 16): 849 / 760 /
/// 739 / 761 / 839 kbps per node, missing replicas at 0 ms 5.28% / 4.43% / 4.55% / 4.30% /
/// 4.36%. One range covers too many keys outside the box (long spreads); many ranges cost
/// one lookup each. 4 is the cheapest; 8 misses a little less.
pub const DEFAULT_MAX_SUB_RANGES: usize = 4;

/// A region of the `dht` grid.
pub type Region = (u32, u32);

/// The mapping from game space to ring keys for one world.
#[derive(Clone, Debug, PartialEq)]
pub struct Keyer {
    keying: Keying,
    range_key: RangeKey,
    max_sub_ranges: usize,
    chunk: u64,
    world: Aabb,
    cols: u32,
    rows: u32,
    salt: u64,
    /// Hilbert tiles along the map's long side (see [`Keyer::hilbert_key`]).
    tiles: u64,
}

/// Most Hilbert tiles along a long map (a longer aspect ratio keeps this many).
pub const MAX_HILBERT_TILES: u64 = 64;

impl Keyer {
    /// A keyer for `world` (the map bounds). For `dht`, the map is cut into about
    /// `regions` square-ish cells (paper §6.1: as many regions as players).
    pub fn new(keying: Keying, world: Aabb, regions: u32, salt: u64) -> Self {
        let w = f64::from((world.max.x - world.min.x).max(1.0));
        let h = f64::from((world.max.y - world.min.y).max(1.0));
        let n = f64::from(regions.max(1));
        let side = (w * h / n).sqrt().max(1e-3);
        let cols = ((w / side).round() as u32).clamp(1, 1 << 16);
        let rows = ((h / side).round() as u32).clamp(1, 1 << 16);
        let tiles = ((w.max(h) / w.min(h)).round() as u64).clamp(1, MAX_HILBERT_TILES);
        Self {
            keying,
            range_key: RangeKey::X,
            max_sub_ranges: DEFAULT_MAX_SUB_RANGES,
            chunk: 0,
            world,
            cols,
            rows,
            salt,
            tiles,
        }
    }

    /// The same keyer with `rangedht` keyed by `range_key`, a box being at most
    /// `max_sub_ranges` key intervals (at least 1; only the Hilbert key uses more than one).
    pub fn with_range_key(mut self, range_key: RangeKey, max_sub_ranges: usize) -> Self {
        self.range_key = range_key;
        self.max_sub_ranges = max_sub_ranges.max(1);
        self
    }

    /// The same keyer with every `rangedht` key interval cut into pieces of at most `span`
    /// keys (0 leaves them whole). Each piece is routed to its own first rendezvous and
    /// spread from there, so a wide subscription is looked up in parallel instead of
    /// walking its whole range along successors (see `LocatorConfig::chunk_nodes`).
    pub fn with_chunk(mut self, span: u64) -> Self {
        self.chunk = span;
        self
    }

    /// Cuts each (non-wrapping) interval into pieces of at most `self.chunk` keys.
    fn chunked(&self, ranges: Vec<(Key, Key)>) -> Vec<(Key, Key)> {
        if self.chunk == 0 {
            return ranges;
        }
        let step = self.chunk - 1;
        let mut out = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            if lo > hi {
                out.push((lo, hi));
                continue;
            }
            let mut a = lo;
            loop {
                let b = a.saturating_add(step).min(hi);
                out.push((a, b));
                if b >= hi {
                    break;
                }
                a = b + 1;
            }
        }
        out
    }

    /// The keying.
    pub fn keying(&self) -> Keying {
        self.keying
    }

    /// The `rangedht` naming attribute (meaningless for `dht`).
    pub fn range_key(&self) -> RangeKey {
        self.range_key
    }

    /// True for keyings whose subscriptions are key intervals spread along successors
    /// (`rangedht`, whatever its naming attribute), false for `dht` (one key per region).
    pub fn is_range(&self) -> bool {
        self.keying == Keying::RangeDht
    }

    /// The map bounds.
    pub fn world(&self) -> Aabb {
        self.world
    }

    /// Columns and rows of the `dht` grid.
    pub fn grid(&self) -> (u32, u32) {
        (self.cols, self.rows)
    }

    /// `rangedht` key of an x coordinate: linear in x, clamped to the map (so keys never
    /// wrap and a range `[lo, hi]` maps to the arc from `key(lo)` to `key(hi)`).
    pub fn x_key(&self, x: f32) -> Key {
        let span = f64::from(self.world.max.x - self.world.min.x).max(1e-6);
        let t = (f64::from(x - self.world.min.x) / span).clamp(0.0, 1.0);
        if !t.is_finite() {
            return 0;
        }
        (t * (u64::MAX as f64)) as u64
    }

    /// `rangedht` key of a y coordinate: the mirror of [`Keyer::x_key`].
    pub fn y_key(&self, y: f32) -> Key {
        let span = f64::from(self.world.max.y - self.world.min.y).max(1e-6);
        let t = (f64::from(y - self.world.min.y) / span).clamp(0.0, 1.0);
        if !t.is_finite() {
            return 0;
        }
        (t * (u64::MAX as f64)) as u64
    }

    /// The Hilbert cell of a coordinate: its position in `[lo, hi]` quantised to 32 bits,
    /// clamped to the map (monotone, so a box's corners bound the cells of its points);
    /// NaN gives cell 0.
    fn cell(v: f32, lo: f32, hi: f32) -> u64 {
        let span = f64::from(hi - lo).max(1e-6);
        let t = (f64::from(v - lo) / span).clamp(0.0, 1.0);
        if !t.is_finite() {
            return 0;
        }
        ((t * (1u64 << hilbert::MAX_ORDER) as f64) as u64).min((1u64 << hilbert::MAX_ORDER) - 1)
    }

    /// Number of square-ish Hilbert tiles the map is cut into along its long side.
    pub fn hilbert_tiles(&self) -> u64 {
        self.tiles
    }

    /// Tile and position inside it, in `[0, 1]`, of a coordinate along the long side.
    fn tile_of(&self, v: f32, lo: f32, hi: f32) -> (u64, f64) {
        let span = f64::from(hi - lo).max(1e-6);
        let u = (f64::from(v - lo) / span).clamp(0.0, 1.0);
        if !u.is_finite() {
            return (0, 0.0);
        }
        let k = self.tiles as f64;
        let t = ((u * k).floor() as u64).min(self.tiles - 1);
        (t, (u * k - t as f64).clamp(0.0, 1.0))
    }

    /// Quantised 32-bit cell of a position in `[0, 1]`.
    fn unit_cell(t: f64) -> u64 {
        let n = 1u64 << hilbert::MAX_ORDER;
        ((t * n as f64) as u64).min(n - 1)
    }

    /// `(long, short)` coordinates and bounds of `p`: x first on a wide map, y on a tall one.
    fn long_short(&self, p: Point3) -> ((f32, f32, f32), (f32, f32, f32)) {
        let w = &self.world;
        let (x, y) = ((p.x, w.min.x, w.max.x), (p.y, w.min.y, w.max.y));
        if w.max.x - w.min.x >= w.max.y - w.min.y {
            (x, y)
        } else {
            (y, x)
        }
    }

    /// The key of Hilbert index `idx` in tile `t`: each tile owns an equal slice of the
    /// ring, in tile order, and its curve is scaled into it (monotonically).
    fn tile_key(&self, t: u64, idx: u64) -> Key {
        let seg = (1u128 << 64) / u128::from(self.tiles);
        (u128::from(t) * seg + u128::from(idx) * seg / (1u128 << 64)) as Key
    }

    /// `rangedht` Hilbert key of a point (`z` is ignored). The map is cut along its long
    /// side into `round(long / short)` tiles (at most [`MAX_HILBERT_TILES`]), each about
    /// square; inside a tile, `(long, short)` are normalised to the tile, quantised to 32
    /// bits and linearised by the Hilbert curve of order 32; tiles follow each other on the
    /// ring. A square map is one tile (the plain curve over the map). Without tiles, a 4:1
    /// map's curve cells would be stretched 4:1 and a box would reach more nodes.
    pub fn hilbert_key(&self, p: Point3) -> Key {
        let ((l, l0, l1), (s, s0, s1)) = self.long_short(p);
        let (t, u) = self.tile_of(l, l0, l1);
        let idx = hilbert::index(hilbert::MAX_ORDER, Self::unit_cell(u), Self::cell(s, s0, s1));
        self.tile_key(t, idx)
    }

    /// The Hilbert key intervals of a box: one cover per tile it overlaps (each within the
    /// budget), joined, adjacent ones merged, then the smallest gaps filled to the budget.
    fn hilbert_ranges(&self, b: &Aabb) -> Vec<(Key, Key)> {
        let ((lmin, l0, l1), (smin, s0, s1)) = self.long_short(b.min);
        let ((lmax, _, _), (smax, _, _)) = self.long_short(b.max);
        let (ta, ua) = self.tile_of(lmin, l0, l1);
        let (tb, ub) = self.tile_of(lmax.max(lmin), l0, l1);
        let (y0, y1) = (Self::cell(smin, s0, s1), Self::cell(smax, s0, s1));
        let mut all: Vec<(Key, Key)> = Vec::new();
        for t in ta..=tb {
            let x0 = if t == ta { Self::unit_cell(ua) } else { 0 };
            let x1 = if t == tb {
                Self::unit_cell(ub)
            } else {
                (1u64 << hilbert::MAX_ORDER) - 1
            };
            // An inverted (invalid) box still gets a well-formed cover.
            let cells = CellBox {
                x0,
                x1: x1.max(x0),
                y0,
                y1: y1.max(y0),
            };
            for (a, z) in hilbert::cover(hilbert::MAX_ORDER, &cells, self.max_sub_ranges) {
                let (ka, kz) = (self.tile_key(t, a), self.tile_key(t, z));
                match all.last_mut() {
                    Some(last) if last.1.checked_add(1) == Some(ka) => last.1 = kz,
                    _ => all.push((ka, kz)),
                }
            }
        }
        hilbert::fill_smallest_gaps(all, self.max_sub_ranges)
    }

    /// The `dht` region containing `p` (clamped to the map).
    pub fn region_of(&self, p: Point3) -> Region {
        let cw_ = f64::from(self.world.max.x - self.world.min.x).max(1e-6) / f64::from(self.cols);
        let ch = f64::from(self.world.max.y - self.world.min.y).max(1e-6) / f64::from(self.rows);
        let cx = (f64::from(p.x - self.world.min.x) / cw_).floor();
        let cy = (f64::from(p.y - self.world.min.y) / ch).floor();
        let clamp = |v: f64, n: u32| {
            if v.is_finite() {
                v.clamp(0.0, f64::from(n - 1)) as u32
            } else {
                0
            }
        };
        (clamp(cx, self.cols), clamp(cy, self.rows))
    }

    /// The key a region hashes to.
    pub fn region_key(&self, r: Region) -> Key {
        mix64(self.salt ^ ((u64::from(r.0) << 32) | u64::from(r.1)))
    }

    /// The key a point publication is routed to.
    pub fn point_key(&self, p: Point3) -> Key {
        match self.keying {
            Keying::RangeDht => match self.range_key {
                RangeKey::X => self.x_key(p.x),
                RangeKey::Y => self.y_key(p.y),
                RangeKey::Hilbert => self.hilbert_key(p),
            },
            Keying::Dht => self.region_key(self.region_of(p)),
        }
    }

    /// The key intervals `[lo, hi]` (inclusive) a subscription box is routed to: each is
    /// sent to the owner of `lo` and, for `rangedht`, spread along successors until `hi`.
    /// Every point inside `b` has its [`Keyer::point_key`] inside one of them.
    ///
    /// - `rangedht` keyed by `x` or `y`: one interval, the box's extent on that axis;
    /// - `rangedht` keyed by Hilbert: at most `max_sub_ranges` sorted, disjoint intervals
    ///   from a quadtree descent over the curve ([`hilbert::cover`]);
    /// - `dht`: one `(k, k)` per region the box overlaps, row by row; `None` if more than
    ///   `limit`.
    pub fn ranges(&self, b: &Aabb, limit: usize) -> Option<Vec<(Key, Key)>> {
        match self.keying {
            Keying::RangeDht => Some(self.chunked(match self.range_key {
                RangeKey::X => vec![self.x_range(b)],
                RangeKey::Y => vec![(self.y_key(b.min.y), self.y_key(b.max.y))],
                RangeKey::Hilbert => self.hilbert_ranges(b),
            })),
            Keying::Dht => Some(
                self.regions_of(b, limit)?
                    .into_iter()
                    .map(|r| self.region_key(r))
                    .map(|k| (k, k))
                    .collect(),
            ),
        }
    }

    /// The `rangedht` key interval `[key(min.x), key(max.x)]` of a box.
    pub fn x_range(&self, b: &Aabb) -> (Key, Key) {
        (self.x_key(b.min.x), self.x_key(b.max.x))
    }

    /// The `dht` regions a box overlaps, row by row; `None` if more than `limit`.
    pub fn regions_of(&self, b: &Aabb, limit: usize) -> Option<Vec<Region>> {
        let lo = self.region_of(b.min);
        let hi = self.region_of(b.max);
        let count = (u64::from(hi.0 - lo.0) + 1) * (u64::from(hi.1 - lo.1) + 1);
        if count > limit as u64 {
            return None;
        }
        let mut out = Vec::with_capacity(count as usize);
        for y in lo.1..=hi.1 {
            for x in lo.0..=hi.0 {
                out.push((x, y));
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> Aabb {
        Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(4800.0, 2400.0, 100.0))
    }

    #[test]
    fn arcs_wrap_and_include_their_end_only() {
        assert!(in_arc(5, 1, 5));
        assert!(!in_arc(1, 1, 5));
        assert!(in_arc(2, u64::MAX - 3, 10), "wraps through zero");
        assert!(!in_arc(11, u64::MAX - 3, 10));
        assert!(in_arc(42, 7, 7), "equal ends are the whole ring");
    }

    /// Keys of a small window around zero (the ring wraps there).
    fn near_zero(i: u64) -> Key {
        i.wrapping_sub(16)
    }

    proptest::proptest! {
        /// Brute force on a window of 32 keys around the wrap: `reaches` is "shares a key".
        #[test]
        fn reaches_is_set_intersection(a in 0u64..32, len in 0u64..32, lo in 0u64..32, hi in 0u64..32) {
            let (a, lo, hi) = (near_zero(a), near_zero(lo), near_zero(hi));
            let b = a.wrapping_add(len);
            proptest::prop_assume!(lo != hi && cw(lo, hi) < 40);
            let shared = (0..=len).any(|i| in_arc(a.wrapping_add(i), lo, hi));
            proptest::prop_assert_eq!(reaches(a, b, lo, hi), shared);
        }

        /// Brute force: a subscription moves iff one of its ranges shares a key with the
        /// handed arc, and is kept iff one shares a key with the kept arc (or it does not
        /// concern the handed arc at all).
        #[test]
        fn split_moves_and_keeps_by_shared_keys(
            ranges in proptest::collection::vec((0u64..48, 0u64..8), 1..4),
            lo in 0u64..48, m in 1u64..16, e in 1u64..16,
        ) {
            let ranges: Vec<(Key, Key)> =
                ranges.into_iter().map(|(a, l)| (near_zero(a), near_zero(a).wrapping_add(l))).collect();
            let lo = near_zero(lo);
            let (mid, end) = (lo.wrapping_add(m), lo.wrapping_add(m + e));
            let shares = |x: Key, y: Key| {
                ranges.iter().any(|&(a, b)| (0..=cw(a, b)).any(|i| in_arc(a.wrapping_add(i), x, y)))
            };
            let (moved, kept) = split_ranges(&ranges, lo, mid, end);
            proptest::prop_assert_eq!(moved.is_some(), shares(lo, mid));
            if let Some(c) = moved {
                proptest::prop_assert!(ranges.contains(&c) && reaches(c.0, c.1, lo, mid));
            }
            proptest::prop_assert_eq!(kept, !shares(lo, mid) || shares(mid, end));
        }
    }

    #[test]
    fn an_interval_ending_inside_an_arc_reaches_it() {
        // Starts before the arc (100, 200], ends inside: the case the old test missed.
        assert!(reaches(90, 150, 100, 200));
        assert!(
            !reaches(90, 100, 100, 200),
            "ends on lo, which is outside (lo, hi]"
        );
        assert!(reaches(90, 101, 100, 200));
        assert!(!reaches(201, 300, 100, 200));
        assert!(reaches(5, 6, 9, 9), "equal ends are the whole ring");
    }

    #[test]
    fn x_keys_are_monotone_and_clamped() {
        let k = Keyer::new(Keying::RangeDht, world(), 16, 1);
        assert_eq!(k.x_key(-50.0), 0);
        assert_eq!(k.x_key(4800.0), u64::MAX);
        assert_eq!(k.x_key(9999.0), u64::MAX);
        assert!(k.x_key(100.0) < k.x_key(101.0));
        assert_eq!(k.x_key(f32::NAN), 0);
    }

    #[test]
    fn y_and_hilbert_keys_are_clamped_and_nan_safe() {
        let k = Keyer::new(Keying::RangeDht, world(), 16, 1).with_range_key(RangeKey::Hilbert, 4);
        assert_eq!(k.y_key(-1.0), 0);
        assert_eq!(k.y_key(2400.0), u64::MAX);
        assert!(k.y_key(10.0) < k.y_key(11.0));
        assert_eq!(k.y_key(f32::NAN), 0);
        // The curve starts at the lower-left corner and ends at the lower-right one.
        assert_eq!(k.hilbert_key(Point3::new(0.0, 0.0, 0.0)), 0);
        assert_eq!(k.hilbert_key(Point3::new(-9e9, -1.0, 0.0)), 0, "clamped below");
        assert_eq!(k.hilbert_key(Point3::new(4800.0, 0.0, 0.0)), u64::MAX);
        assert_eq!(
            k.hilbert_key(Point3::new(1e12, -3.0, 7.0)),
            u64::MAX,
            "clamped above"
        );
        assert_eq!(k.hilbert_key(Point3::new(f32::NAN, f32::NAN, 0.0)), 0);
        assert_eq!(
            k.point_key(Point3::new(1200.0, 600.0, 0.0)),
            k.hilbert_key(Point3::new(1200.0, 600.0, 0.0))
        );
        // The 2:1 map is two square tiles, each half of the ring, in order along x.
        assert_eq!(k.hilbert_tiles(), 2);
        assert!(k.hilbert_key(Point3::new(2399.0, 0.0, 0.0)) < 1 << 63);
        assert!(k.hilbert_key(Point3::new(2401.0, 0.0, 0.0)) >= 1 << 63);
        // Inside a tile, its first quadrant (lower-left quarter) is its first quarter.
        assert!(k.hilbert_key(Point3::new(1199.0, 1199.0, 0.0)) < 1 << 61);
        assert!(k.hilbert_key(Point3::new(1199.0, 1201.0, 0.0)) >= 1 << 61);
        let tall = Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(1000.0, 4100.0, 0.0));
        let kt = Keyer::new(Keying::RangeDht, tall, 16, 1).with_range_key(RangeKey::Hilbert, 4);
        assert_eq!(kt.hilbert_tiles(), 4, "tiles run along the long side (y)");
        assert!(kt.hilbert_key(Point3::new(999.0, 1020.0, 0.0)) < 1 << 62);
        assert!(kt.hilbert_key(Point3::new(0.0, 1030.0, 0.0)) >= 1 << 62);
        let square = Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(3000.0, 3000.0, 0.0));
        let ks = Keyer::new(Keying::RangeDht, square, 16, 1).with_range_key(RangeKey::Hilbert, 4);
        assert_eq!(ks.hilbert_tiles(), 1);
        assert!(ks.hilbert_key(Point3::new(1499.0, 1499.0, 0.0)) < 1 << 62);
        assert!(ks.hilbert_key(Point3::new(1499.0, 1501.0, 0.0)) >= 1 << 62);
    }

    #[test]
    fn x_and_y_boxes_are_one_range_on_their_axis() {
        let b = Aabb::from_corners(Point3::new(100.0, 200.0, 0.0), Point3::new(300.0, 500.0, 0.0));
        let kx = Keyer::new(Keying::RangeDht, world(), 16, 1);
        assert_eq!(kx.ranges(&b, 10), Some(vec![kx.x_range(&b)]));
        let ky = kx.clone().with_range_key(RangeKey::Y, 4);
        assert_eq!(ky.ranges(&b, 10), Some(vec![(ky.y_key(200.0), ky.y_key(500.0))]));
        assert_eq!(ky.point_key(Point3::new(4000.0, 300.0, 0.0)), ky.y_key(300.0));
        let kd = Keyer::new(Keying::Dht, world(), 32, 1);
        let want: Vec<(Key, Key)> = kd
            .regions_of(&b, 10)
            .unwrap()
            .into_iter()
            .map(|r| (kd.region_key(r), kd.region_key(r)))
            .collect();
        assert_eq!(kd.ranges(&b, 10), Some(want));
    }

    #[test]
    fn range_key_names_parse_and_unknown_ones_list_the_valid_ones() {
        for k in RangeKey::ALL {
            assert_eq!(k.name().parse::<RangeKey>(), Ok(k));
        }
        assert_eq!(RangeKey::default(), RangeKey::X);
        let e = "z".parse::<RangeKey>().unwrap_err().to_string();
        assert_eq!(e, "range key `z` is not available; valid: x, y, hilbert");
    }

    proptest::proptest! {
        /// Brute force: every point of a random box (corners, edges, random interior points,
        /// some outside the map) has its key inside one of the box's intervals; the
        /// intervals are sorted, disjoint and within the budget.
        #[test]
        fn every_point_of_a_box_is_in_one_of_its_ranges(
            rk in proptest::sample::select(RangeKey::ALL.to_vec()),
            budget in 1usize..9,
            x0 in -200.0f32..5000.0, y0 in -200.0f32..2600.0,
            w in 0.0f32..3000.0, h in 0.0f32..3000.0,
            pts in proptest::collection::vec((0.0f32..=1.0, 0.0f32..=1.0), 32),
        ) {
            let k = Keyer::new(Keying::RangeDht, world(), 16, 1).with_range_key(rk, budget);
            let b = Aabb::from_corners(Point3::new(x0, y0, 0.0), Point3::new(x0 + w, y0 + h, 0.0));
            let iv = k.ranges(&b, 0).unwrap();
            proptest::prop_assert!(!iv.is_empty() && iv.len() <= budget);
            for w in iv.windows(2) {
                proptest::prop_assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0, "sorted, disjoint: {iv:?}");
            }
            let corners = [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.5, 0.0), (1.0, 0.5)];
            for (u, v) in corners.into_iter().chain(pts) {
                let p = Point3::new(b.min.x + u * (b.max.x - b.min.x), b.min.y + v * (b.max.y - b.min.y), 0.0);
                proptest::prop_assume!(b.contains(p));
                let key = k.point_key(p);
                proptest::prop_assert!(
                    iv.iter().any(|(lo, hi)| (*lo..=*hi).contains(&key)),
                    "{rk}: point {p:?} key {key} outside {iv:?}"
                );
            }
        }
    }

    #[test]
    fn chunked_ranges_cut_every_interval_into_contiguous_pieces() {
        let b = Aabb::from_corners(Point3::new(100.0, 200.0, 0.0), Point3::new(4000.0, 2000.0, 0.0));
        for rk in RangeKey::ALL {
            let whole = Keyer::new(Keying::RangeDht, world(), 16, 1).with_range_key(rk, 4);
            let span = u64::MAX / 16;
            let cut = whole.clone().with_chunk(span);
            let (w, c) = (whole.ranges(&b, 0).unwrap(), cut.ranges(&b, 0).unwrap());
            assert!(c.len() > w.len(), "{rk}: a box over most of the map is cut");
            // The pieces of each interval are contiguous, in order, and no longer than span.
            let mut it = c.iter().copied().peekable();
            for (lo, hi) in w {
                let mut at = lo;
                loop {
                    let (a, z) = it.next().expect("a piece");
                    assert_eq!(a, at, "{rk}: pieces are contiguous");
                    assert!(z >= a && z - a < span, "{rk}: piece too long");
                    if z == hi {
                        break;
                    }
                    at = z + 1;
                }
            }
            assert!(it.next().is_none());
            // Zero keeps them whole; dht is never cut.
            assert_eq!(whole.clone().with_chunk(0).ranges(&b, 0), whole.ranges(&b, 0));
        }
        let d = Keyer::new(Keying::Dht, world(), 32, 1);
        assert_eq!(d.clone().with_chunk(7).ranges(&b, 99), d.ranges(&b, 99));
    }

    #[test]
    fn dht_grid_has_about_the_requested_regions() {
        let k = Keyer::new(Keying::Dht, world(), 32, 1);
        assert_eq!(k.grid(), (8, 4));
        assert_eq!(k.region_of(Point3::new(599.0, 601.0, 0.0)), (0, 1));
        assert_eq!(k.region_of(Point3::new(1e9, -5.0, 0.0)), (7, 0));
        let b = Aabb::from_corners(Point3::new(500.0, 500.0, 0.0), Point3::new(700.0, 700.0, 0.0));
        assert_eq!(k.regions_of(&b, 10), Some(vec![(0, 0), (1, 0), (0, 1), (1, 1)]));
        assert_eq!(k.regions_of(&b, 3), None);
    }
}
