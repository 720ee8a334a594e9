//! Visibility maps (paper `004` §3.1, §4, §5.1): which cells have a direct line of sight
//! to which, stored as a bit half-matrix.
//!
//! *Line of sight* ([`Sight`]): the segment between two cell centres (§4: "a ray is cast
//! from the center of a cell to the center of another") is blocked if it meets any
//! obstacle box (boundaries included: grazing a corner blocks) or, with a height map,
//! if the terrain rises above the straight line joining the two eye points (terrain
//! height plus eye height at each end, §5.1). A cell whose centre is inside an obstacle
//! sees nothing. To test only nearby boxes, obstacles are bucketed in a uniform grid
//! and the segment walks the buckets it crosses (a 2-D DDA); obstacles too large for
//! the buckets are tested for every segment. While a row is built, the obstacle that
//! blocked the previous sight line is tried first (neighbouring targets tend to hide
//! behind the same wall). The test is evaluated from the lexicographically smaller
//! endpoint, so it is exactly symmetric.
//!
//! *Range*: sight lines are limited to the largest area of interest (§3.1), so only
//! cells within that distance are tested.
//!
//! *Storage*: the relation is symmetric, so only pairs `i < j` are kept: one bit each,
//! row `i` holding `j = i+1 … n−1` (§3.1 "a half-matrix of boolean values"). Rows start
//! on 64-bit word boundaries, which costs at most 63 bits per row (≈ 0.8% at 17,000
//! cells) and lets threads fill disjoint rows without sharing words: 17,005 cells (the
//! paper's level, §5.1) take 18.2 MB, the paper's "less than 20 megabytes".
//!
//! *Build*: rows are cut into chunks that `threads` scoped threads take from a shared
//! queue; a row's bits depend on nothing but the row, so the result is identical for
//! any thread count.

use crate::error::LoadModelError;
use crate::grid::Grid;
use crate::map::{HeightMap, Map};
use std::sync::Mutex;

/// Largest number of cells a visibility map may have (n(n−1)/2 bits ≈ 268 MB).
pub const MAX_VISIBILITY_CELLS: usize = 65_536;
/// Largest number of buckets one obstacle is registered in (larger ones are tested for
/// every segment).
const MAX_SPAN: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

/// True if the closed segment `a–b` meets the closed rectangle (slab test).
fn segment_hits(a: (f64, f64), b: (f64, f64), r: &Rect) -> bool {
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, d, lo, hi) in [(a.0, b.0 - a.0, r.x0, r.x1), (a.1, b.1 - a.1, r.y0, r.y1)] {
        if d == 0.0 {
            if p < lo || p > hi {
                return false;
            }
        } else {
            let (ta, tb) = ((lo - p) / d, (hi - p) / d);
            let (ta, tb) = if ta <= tb { (ta, tb) } else { (tb, ta) };
            t0 = t0.max(ta);
            t1 = t1.min(tb);
            if t0 > t1 {
                return false;
            }
        }
    }
    true
}

/// Line-of-sight oracle over a map's obstacles and terrain (module docs).
#[derive(Clone, Debug)]
pub struct Sight {
    rects: Vec<Rect>,
    bucket: f64,
    bx: usize,
    by: usize,
    /// CSR bucket lists: obstacles of bucket `k` are `items[starts[k]..starts[k + 1]]`.
    starts: Vec<usize>,
    items: Vec<u32>,
    /// Obstacles too large for the buckets, tested for every segment.
    global: Vec<u32>,
    height_map: Option<HeightMap>,
}

impl Sight {
    /// An oracle for segments inside `[0, extent.0] × [0, extent.1]` (segments outside
    /// are still answered correctly, only more slowly).
    pub fn new(map: &Map, extent: (f64, f64)) -> Self {
        let rects: Vec<Rect> = map
            .obstacles
            .iter()
            .map(|b| Rect {
                x0: f64::from(b.min.x),
                y0: f64::from(b.min.y),
                x1: f64::from(b.max.x),
                y1: f64::from(b.max.y),
            })
            .collect();
        let (ex, ey) = (
            extent.0.max(map.width).max(1e-9),
            extent.1.max(map.height).max(1e-9),
        );
        // About four buckets per obstacle, between 1 and 65,536 buckets.
        let target = (4 * rects.len()).clamp(1, 1 << 16) as f64;
        let bucket = (ex * ey / target).sqrt().max(ex.max(ey) / 4096.0);
        let bx = ((ex / bucket).ceil() as usize).max(1);
        let by = ((ey / bucket).ceil() as usize).max(1);
        let eps = 1e-9 * ex.max(ey);
        let range = |lo: f64, hi: f64, n: usize| -> Option<(usize, usize)> {
            let a = ((lo - eps) / bucket).floor();
            let b = ((hi + eps) / bucket).floor();
            if b < 0.0 || a >= n as f64 {
                return None;
            }
            Some((a.max(0.0) as usize, (b as usize).min(n - 1)))
        };
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); bx * by];
        // Obstacles spanning more than MAX_SPAN buckets are tested for every segment
        // instead, which bounds the index at MAX_SPAN entries per obstacle.
        let mut global = Vec::new();
        for (k, r) in rects.iter().enumerate() {
            if let (Some((i0, i1)), Some((j0, j1))) = (range(r.x0, r.x1, bx), range(r.y0, r.y1, by)) {
                if (i1 - i0 + 1) * (j1 - j0 + 1) > MAX_SPAN {
                    global.push(k as u32);
                    continue;
                }
                for j in j0..=j1 {
                    for i in i0..=i1 {
                        lists[j * bx + i].push(k as u32);
                    }
                }
            }
        }
        let mut starts = Vec::with_capacity(lists.len() + 1);
        let mut items = Vec::new();
        starts.push(0);
        for l in lists {
            items.extend(l);
            starts.push(items.len());
        }
        Self {
            rects,
            bucket,
            bx,
            by,
            starts,
            items,
            global,
            height_map: map.height_map.clone(),
        }
    }

    /// True if `a` and `b` see each other (module docs). Symmetric.
    pub fn clear(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        let (a, b) = if (a.0, a.1) <= (b.0, b.1) { (a, b) } else { (b, a) };
        self.obstacle_between(a, b).is_none() && self.terrain_clear(a, b)
    }

    /// [`Sight::clear`] that first tries the obstacle in `hint` (the one that blocked
    /// the previous segment, which often blocks the next one too) and stores the
    /// obstacle that blocks this segment in it. Same answers as `clear`.
    pub fn clear_hinted(&self, a: (f64, f64), b: (f64, f64), hint: &mut Option<u32>) -> bool {
        let (a, b) = if (a.0, a.1) <= (b.0, b.1) { (a, b) } else { (b, a) };
        if let Some(k) = *hint
            && segment_hits(a, b, &self.rects[k as usize])
        {
            return false;
        }
        match self.obstacle_between(a, b) {
            Some(k) => {
                *hint = Some(k);
                false
            }
            None => self.terrain_clear(a, b),
        }
    }

    /// The same answer as [`Sight::clear`], testing every obstacle (the reference the
    /// bucketed walk is checked against).
    pub fn clear_exhaustive(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        let (a, b) = if (a.0, a.1) <= (b.0, b.1) { (a, b) } else { (b, a) };
        !self.rects.iter().any(|r| segment_hits(a, b, r)) && self.terrain_clear(a, b)
    }

    fn bucket_of(&self, v: f64, n: usize) -> usize {
        let k = (v / self.bucket).floor();
        if k <= 0.0 { 0 } else { (k as usize).min(n - 1) }
    }

    /// Walks the buckets the segment crosses and tests their obstacles; returns the
    /// first obstacle found that meets the segment.
    fn obstacle_between(&self, a: (f64, f64), b: (f64, f64)) -> Option<u32> {
        let hit = |o: &u32| segment_hits(a, b, &self.rects[*o as usize]);
        let outside = |p: (f64, f64)| {
            p.0 < 0.0 || p.1 < 0.0 || p.0 > self.bx as f64 * self.bucket || p.1 > self.by as f64 * self.bucket
        };
        if outside(a) || outside(b) {
            return self.exhaustive_hit(a, b);
        }
        if let Some(o) = self.global.iter().find(|o| hit(o)) {
            return Some(*o);
        }
        let test = |cx: usize, cy: usize| -> Option<u32> {
            let k = cy * self.bx + cx;
            self.items[self.starts[k]..self.starts[k + 1]]
                .iter()
                .find(|o| hit(o))
                .copied()
        };
        let (mut cx, mut cy) = (self.bucket_of(a.0, self.bx), self.bucket_of(a.1, self.by));
        let (ex, ey) = (self.bucket_of(b.0, self.bx), self.bucket_of(b.1, self.by));
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let axis = |p: f64, d: f64, c: usize| -> (f64, f64) {
            // (t at which the next bucket boundary is crossed, t per bucket)
            if d > 0.0 {
                (((c + 1) as f64 * self.bucket - p) / d, self.bucket / d)
            } else if d < 0.0 {
                ((c as f64 * self.bucket - p) / d, -self.bucket / d)
            } else {
                (f64::INFINITY, f64::INFINITY)
            }
        };
        let (mut tx, dtx) = axis(a.0, dx, cx);
        let (mut ty, dty) = axis(a.1, dy, cy);
        // Canonical order makes dx ≥ 0; dy may have either sign.
        for _ in 0..(self.bx + self.by + 2) {
            if let Some(o) = test(cx, cy) {
                return Some(o);
            }
            if cx == ex && cy == ey {
                return None;
            }
            if tx <= ty {
                if cx == ex {
                    // Rounding: x is done, finish along y.
                    tx = f64::INFINITY;
                    continue;
                }
                cx = if dx > 0.0 { cx + 1 } else { cx.saturating_sub(1) };
                tx += dtx;
            } else {
                if cy == ey {
                    ty = f64::INFINITY;
                    continue;
                }
                cy = if dy > 0.0 { cy + 1 } else { cy.saturating_sub(1) };
                ty += dty;
            }
        }
        // Unreachable in exact arithmetic; be safe rather than fast.
        self.exhaustive_hit(a, b)
    }

    fn exhaustive_hit(&self, a: (f64, f64), b: (f64, f64)) -> Option<u32> {
        self.rects
            .iter()
            .position(|r| segment_hits(a, b, r))
            .map(|k| k as u32)
    }

    fn terrain_clear(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        let Some(h) = &self.height_map else { return true };
        let za = h.height_at(a.0, a.1) + h.eye_height;
        let zb = h.height_at(b.0, b.1) + h.eye_height;
        let len = (b.0 - a.0).hypot(b.1 - a.1);
        let steps = ((len / (h.cell_size / 2.0)).ceil() as usize).max(1);
        (1..steps).all(|s| {
            let t = s as f64 / steps as f64;
            let ground = h.height_at(a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1));
            ground <= za + t * (zb - za)
        })
    }
}

/// What counts as two cells seeing each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SightRule {
    /// A straight line between the centres misses every obstacle and stays above the
    /// terrain (paper `004` §4, §5.1).
    #[default]
    LineOfSight,
    /// Every pair of occupiable cells within range: `V` is 1 and only the AoI limits
    /// interest (Colyseus-style AoI boxes, paper `000` §4.1, which see through walls).
    RangeOnly,
}

/// A visibility map: a symmetric boolean relation over the cells of a grid, stored as a
/// bit half-matrix (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct VisibilityMap {
    n: usize,
    free: Vec<bool>,
    row_start: Vec<usize>,
    bits: Vec<u64>,
    max_range: Option<f64>,
}

impl VisibilityMap {
    /// Builds the map of `grid` over `map`, testing only pairs whose centres are at most
    /// `max_range` apart (all pairs for `None`), with `threads` threads.
    pub fn build(
        map: &Map,
        grid: &Grid,
        max_range: Option<f64>,
        threads: usize,
    ) -> Result<Self, LoadModelError> {
        Self::build_with(map, grid, max_range, threads, SightRule::LineOfSight)
    }

    /// [`VisibilityMap::build`] with a choice of what counts as seeing: line of sight
    /// (the paper), or only the range ([`SightRule::RangeOnly`]: interest that sees
    /// through walls, as the model workload's AoI boxes do). Obstacle cells see nothing
    /// either way.
    pub fn build_with(
        map: &Map,
        grid: &Grid,
        max_range: Option<f64>,
        threads: usize,
        rule: SightRule,
    ) -> Result<Self, LoadModelError> {
        let n = grid.len();
        if n > MAX_VISIBILITY_CELLS {
            return Err(LoadModelError::TooLarge {
                what: "visibility map cells",
                size: n,
                limit: MAX_VISIBILITY_CELLS,
            });
        }
        if let Some(r) = max_range
            && !(r.is_finite() && r >= 0.0)
        {
            return Err(LoadModelError::spec(
                format!("range {r}"),
                "must be finite and ≥ 0",
            ));
        }
        let free = grid.free_cells(map);
        let extent = (grid.nx as f64 * grid.cell_size, grid.ny as f64 * grid.cell_size);
        let sight = match rule {
            SightRule::LineOfSight => Sight::new(map, extent),
            SightRule::RangeOnly => Sight::new(&Map::empty(map.width, map.height)?, extent),
        };
        let mut row_start = Vec::with_capacity(n + 1);
        let mut words = 0;
        for i in 0..n {
            row_start.push(words);
            words += (n - 1 - i).div_ceil(64);
        }
        row_start.push(words);
        let mut bits = vec![0u64; words];

        // Cut the rows into chunks of about equal word counts (or rows, when range
        // limited) and let the threads take them from a queue.
        let threads = threads.max(1);
        let n_chunks = (threads * 32).min(n);
        let mut chunks: Vec<(usize, usize, &mut [u64])> = Vec::with_capacity(n_chunks);
        let mut rest: &mut [u64] = &mut bits;
        let mut r0 = 0;
        for c in 0..n_chunks {
            let r1 = if c + 1 == n_chunks {
                n
            } else {
                chunk_end(n, n_chunks, c, max_range.is_some())
            };
            let r1 = r1.max(r0);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(row_start[r1] - row_start[r0]);
            chunks.push((r0, r1, head));
            rest = tail;
            r0 = r1;
        }
        chunks.reverse();
        let queue = Mutex::new(chunks);
        let ctx = RowCtx {
            grid,
            free: &free,
            sight: &sight,
            max_range,
            row_start: &row_start,
        };
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        let job = queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                        let Some((r0, r1, words)) = job else { break };
                        let base = ctx.row_start[r0];
                        for i in r0..r1 {
                            let row = &mut words[ctx.row_start[i] - base..ctx.row_start[i + 1] - base];
                            ctx.fill_row(i, row);
                        }
                    }
                });
            }
        });
        Ok(Self {
            n,
            free,
            row_start,
            bits,
            max_range,
        })
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True if there are no cells.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The range limit the map was built with.
    pub fn max_range(&self) -> Option<f64> {
        self.max_range
    }

    /// True if cell `i` is occupiable (its centre is on the map and outside obstacles).
    pub fn is_free(&self, i: usize) -> bool {
        self.free[i]
    }

    /// `V(i, j)` of §5.2: true if cells `i` and `j` see each other. A free cell sees
    /// itself; an obstacle cell sees nothing.
    pub fn visible(&self, i: usize, j: usize) -> bool {
        if i == j {
            return self.free[i];
        }
        let (a, b) = if i < j { (i, j) } else { (j, i) };
        let k = b - a - 1;
        self.bits[self.row_start[a] + k / 64] >> (k % 64) & 1 == 1
    }

    /// The cells `j > i` that cell `i` sees, in increasing order.
    pub fn row(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let words = &self.bits[self.row_start[i]..self.row_start[i + 1]];
        words.iter().enumerate().flat_map(move |(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(i + 1 + w * 64 + b)
            })
        })
    }

    /// Per cell, how many other cells it sees (§3.1: "the boolean values can then be
    /// summed against a column or row to find the total number of other cells a given
    /// cell may see").
    pub fn counts(&self) -> Vec<u32> {
        let mut c = vec![0u32; self.n];
        for i in 0..self.n {
            for j in self.row(i) {
                c[i] += 1;
                c[j] += 1;
            }
        }
        c
    }

    /// Number of unordered visible pairs `{i, j}`, `i ≠ j`.
    pub fn pairs(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Bytes of the bit storage.
    pub fn storage_bytes(&self) -> usize {
        self.bits.len() * 8
    }
}

/// End row of chunk `c` of `k`: equal rows when range-limited (each row does about the
/// same work), otherwise equal shares of the half-matrix (row `i` has `n − 1 − i` pairs).
fn chunk_end(n: usize, k: usize, c: usize, limited: bool) -> usize {
    let f = (c + 1) as f64 / k as f64;
    let r = if limited {
        f * n as f64
    } else {
        // Rows 0..r hold a fraction 1 − (1 − r/n)² of the pairs.
        n as f64 * (1.0 - (1.0 - f).sqrt())
    };
    (r.round() as usize).min(n)
}

struct RowCtx<'a> {
    grid: &'a Grid,
    free: &'a [bool],
    sight: &'a Sight,
    max_range: Option<f64>,
    row_start: &'a [usize],
}

impl RowCtx<'_> {
    fn fill_row(&self, i: usize, row: &mut [u64]) {
        if !self.free[i] {
            return;
        }
        let a = self.grid.center(i);
        let mut hint = None;
        let mut check = |j: usize| {
            if self.free[j] && self.sight.clear_hinted(a, self.grid.center(j), &mut hint) {
                let k = j - i - 1;
                row[k / 64] |= 1 << (k % 64);
            }
        };
        match self.max_range {
            None => (i + 1..self.grid.len()).for_each(&mut check),
            Some(r) => {
                let (xi, yi) = self.grid.coords(i);
                let reach = (r / self.grid.cell_size).floor() as usize + 1;
                let r2 = r * r;
                let x0 = xi.saturating_sub(reach);
                let x1 = (xi + reach).min(self.grid.nx - 1);
                for y in yi..=(yi + reach).min(self.grid.ny - 1) {
                    let start = if y == yi { xi + 1 } else { x0 };
                    for x in start..=x1 {
                        let dx = (x as f64 - xi as f64) * self.grid.cell_size;
                        let dy = (y as f64 - yi as f64) * self.grid.cell_size;
                        if dx * dx + dy * dy <= r2 {
                            check(y * self.grid.nx + x);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_wall_blocks_and_open_ground_does_not() {
        // 5 × 1 cells of side 10; a wall across x ∈ [22, 28] covers the centre of cell 2
        // (x = 25), which becomes an obstacle cell.
        let map = Map::with_boxes(50.0, 10.0, &[(22.0, -1.0, 28.0, 11.0)]).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        let v = VisibilityMap::build(&map, &g, None, 2).unwrap();
        assert!(v.visible(0, 1) && v.visible(1, 0) && v.visible(3, 4));
        assert!(!v.visible(0, 3) && !v.visible(1, 4) && !v.visible(4, 0));
        assert!(!v.visible(2, 2) && !v.visible(2, 1) && v.visible(0, 0));
        assert_eq!(v.pairs(), 2);
        assert_eq!(v.counts(), vec![1, 1, 0, 1, 1]);
        // Range limit: 10 units reach only neighbours.
        let open = Map::empty(50.0, 10.0).unwrap();
        let r = VisibilityMap::build(&open, &g, Some(10.0), 1).unwrap();
        assert!(r.visible(0, 1) && !r.visible(0, 2));
        assert_eq!(r.pairs(), 4);
        assert_eq!(VisibilityMap::build(&open, &g, None, 1).unwrap().pairs(), 10);
    }

    #[test]
    fn range_only_sees_through_walls_but_not_from_inside_them() {
        let map = Map::with_boxes(50.0, 10.0, &[(22.0, -1.0, 28.0, 11.0)]).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        let v = VisibilityMap::build_with(&map, &g, None, 2, SightRule::RangeOnly).unwrap();
        assert!(v.visible(0, 4) && v.visible(1, 3));
        assert!(!v.visible(2, 0) && !v.visible(2, 2));
        // Free cells 0, 1, 3, 4: all 6 pairs.
        assert_eq!(v.pairs(), 6);
    }

    #[test]
    fn terrain_blocks_low_sight_lines() {
        // A ridge of height 10 in the middle of a 5 × 1 strip, eye height 2.
        let mut map = Map::empty(50.0, 10.0).unwrap();
        map.height_map = Some(HeightMap {
            cell_size: 10.0,
            eye_height: 2.0,
            nx: 6,
            ny: 1,
            heights: vec![0.0, 0.0, 0.0, 10.0, 0.0, 0.0],
        });
        let s = Sight::new(&map, (50.0, 10.0));
        assert!(!s.clear((5.0, 5.0), (45.0, 5.0)));
        assert!(s.clear((5.0, 5.0), (15.0, 5.0)));
        // From the ridge top one sees down.
        assert!(s.clear((30.0, 5.0), (45.0, 5.0)));
    }

    #[test]
    fn large_obstacles_outside_the_index_still_block() {
        // 300 tiny boxes make small buckets; the big wall spans far more than MAX_SPAN.
        let mut rng = worldmesh_core::DetRng::new(3);
        let mut boxes: Vec<(f64, f64, f64, f64)> = (0..300)
            .map(|_| {
                let (x, y) = (rng.range_f64(0.0, 99.0), rng.range_f64(0.0, 79.0));
                (x, y, x + 0.3, y + 0.3)
            })
            .collect();
        boxes.push((10.0, 38.0, 90.0, 42.0));
        let map = Map::with_boxes(100.0, 80.0, &boxes).unwrap();
        let s = Sight::new(&map, (100.0, 80.0));
        assert_eq!(s.global, vec![300]);
        assert!(!s.clear((50.0, 10.0), (50.0, 70.0)));
        for _ in 0..5000 {
            let p = (rng.range_f64(0.0, 100.0), rng.range_f64(0.0, 80.0));
            let q = (rng.range_f64(0.0, 100.0), rng.range_f64(0.0, 80.0));
            assert_eq!(s.clear(p, q), s.clear_exhaustive(p, q), "{p:?} {q:?}");
        }
    }

    #[test]
    fn too_many_cells_is_refused() {
        let map = Map::empty(1000.0, 1000.0).unwrap();
        let g = Grid::for_map(&map, 1.0).unwrap();
        assert!(matches!(
            VisibilityMap::build(&map, &g, Some(5.0), 1),
            Err(LoadModelError::TooLarge { .. })
        ));
    }

    fn boxes() -> impl Strategy<Value = Vec<(f64, f64, f64, f64)>> {
        proptest::collection::vec((0.0f64..100.0, 0.0f64..80.0, 0.5f64..30.0, 0.5f64..30.0), 0..12)
            .prop_flat_map(|v| {
                // Sometimes one large box, which spans too many buckets to be indexed.
                (
                    Just(v),
                    proptest::option::of((0.0f64..20.0, 0.0f64..20.0, 60.0f64..90.0, 40.0f64..60.0)),
                )
            })
            .prop_map(|(mut v, big)| {
                v.extend(big);
                v
            })
            .prop_map(|v| v.into_iter().map(|(x, y, w, h)| (x, y, x + w, y + h)).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The bucketed, ranged, threaded map equals brute force over every pair, and
        /// the sight test is symmetric.
        #[test]
        fn map_matches_brute_force(b in boxes(), cell in 6.0f64..15.0, range in proptest::option::of(5.0f64..60.0),
                                   threads in 1usize..4) {
            let map = Map::with_boxes(100.0, 80.0, &b).unwrap();
            let g = Grid::for_map(&map, cell).unwrap();
            let v = VisibilityMap::build(&map, &g, range, threads).unwrap();
            let s = Sight::new(&map, (100.0, 80.0));
            let free = g.free_cells(&map);
            for i in 0..g.len() {
                for j in 0..g.len() {
                    if i == j { continue; }
                    let (a, c) = (g.center(i), g.center(j));
                    let in_range = range.is_none_or(|r| (a.0 - c.0).hypot(a.1 - c.1) <= r + 1e-9);
                    let want = free[i] && free[j] && in_range && s.clear_exhaustive(a, c);
                    prop_assert_eq!(v.visible(i, j), want, "cells {} {}", i, j);
                    prop_assert_eq!(v.visible(i, j), v.visible(j, i));
                }
            }
        }

        #[test]
        fn sight_is_symmetric_and_matches_exhaustive(b in boxes(), p in (0.0f64..100.0, 0.0f64..80.0),
                                                     q in (0.0f64..100.0, 0.0f64..80.0)) {
            let map = Map::with_boxes(100.0, 80.0, &b).unwrap();
            let s = Sight::new(&map, (100.0, 80.0));
            prop_assert_eq!(s.clear(p, q), s.clear(q, p));
            prop_assert_eq!(s.clear(p, q), s.clear_exhaustive(p, q));
            // Any hint (right, wrong or none) gives the same answer.
            for h in [None, Some(0u32), Some(b.len().saturating_sub(1) as u32)] {
                let mut hint = if b.is_empty() { None } else { h };
                prop_assert_eq!(s.clear_hinted(p, q, &mut hint), s.clear(p, q));
            }
        }
    }
}
