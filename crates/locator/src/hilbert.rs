//! The Hilbert curve: a linearisation of the 2-D game plane into the 1-D `rangedht` key
//! (issue 4: "the key is one naming attribute … or a linearized key from a space-filling
//! curve", paper `000` §3 "Object location", §6.1).
//!
//! **Model.** The square `[0, 2^k)²` of integer cells is visited by a curve of order `k`
//! that passes through every cell exactly once; a cell's index along the curve is its key.
//! The curve of order `k` is built from four curves of order `k − 1`, one per quadrant,
//! visited lower-left, upper-left, upper-right, lower-right; the lower-left copy is
//! mirrored on the main diagonal (x ↔ y) and the lower-right copy on the anti-diagonal, so
//! that each copy ends next to where the following one starts. Hence consecutive indices
//! are always 4-neighbour cells, and every quadrant at any depth `d` is one contiguous,
//! aligned block of `4^(k−d)` indices.
//!
//! **Why Hilbert.** A range DHT keyed by `x` turns a subscription box into one key interval,
//! but nodes then own thin vertical strips of the map: a box as wide as a few strips
//! reaches all of them, however short it is. A space-filling curve keeps both coordinates
//! local: nearby cells get nearby keys, and the arc a node owns is a compact patch of the
//! map. Among the usual curves the Hilbert curve has the best locality (it never jumps,
//! unlike the Z-order curve), so a box is covered by few key intervals. The price: a box
//! is in general *several* intervals, each routed and spread on its own ([`cover`]).
//!
//! **Long maps.** Normalising each axis of a map of aspect ratio `r` on its own would
//! stretch every patch `r` times: on the model's 4:1 `rect` map a box then reached more
//! patches than `x` strips (`locator-bandwidth`, 256 nodes: 11.1 vs 8.7 kB/s per node). So
//! the keyer cuts a long map into `round(r)` square tiles along its long side, each with
//! its own curve and an equal, consecutive slice of the ring (`Keyer::hilbert_key`):
//! 7.7 kB/s at 256 nodes, and 1.25× growth from 32 to 256 nodes instead of 1.72×. A
//! square map is one tile.

/// Largest curve order (cells per axis `2^32`, indices in `u64`).
pub const MAX_ORDER: u32 = 32;

/// Index along the Hilbert curve of order `order` (1..=32) of the cell `(x, y)`; the
/// coordinates are taken modulo `2^order`.
///
/// Walks the quadtree from the top: at each level the quadrant of the cell gives two
/// digits of the index (in visiting order 0: lower-left, 1: upper-left, 2: upper-right,
/// 3: lower-right), and the cell's coordinates are then re-expressed in the frame of that
/// quadrant's (mirrored) sub-curve.
pub fn index(order: u32, x: u64, y: u64) -> u64 {
    let order = order.clamp(1, MAX_ORDER);
    let mask = (1u64 << order) - 1;
    let (mut x, mut y) = (x & mask, y & mask);
    let mut d: u64 = 0;
    for level in (0..order).rev() {
        let half = 1u64 << level;
        let right = x & half != 0;
        let up = y & half != 0;
        let quadrant: u64 = match (right, up) {
            (false, false) => 0,
            (false, true) => 1,
            (true, true) => 2,
            (true, false) => 3,
        };
        d |= quadrant << (2 * level);
        // Coordinates inside the quadrant, then into its sub-curve's frame.
        let (lx, ly) = (x & (half - 1), y & (half - 1));
        (x, y) = match quadrant {
            // Lower-left: mirrored on the main diagonal.
            0 => (ly, lx),
            // Upper quadrants: same orientation.
            1 | 2 => (lx, ly),
            // Lower-right: mirrored on the anti-diagonal.
            _ => (half - 1 - ly, half - 1 - lx),
        };
    }
    d
}

/// An axis-aligned block of cells, inclusive corners, on the grid of one curve order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellBox {
    /// Lowest column.
    pub x0: u64,
    /// Highest column.
    pub x1: u64,
    /// Lowest row.
    pub y0: u64,
    /// Highest row.
    pub y1: u64,
}

/// A quadtree node: the square of side `2^(order − depth)` with lower-left cell `(x, y)`.
#[derive(Clone, Copy)]
struct Quad {
    depth: u32,
    x: u64,
    y: u64,
}

impl Quad {
    fn side(self, order: u32) -> u64 {
        1u64 << (order - self.depth)
    }

    /// The contiguous index block of this square.
    fn block(self, order: u32) -> (u64, u64) {
        let bits = 2 * (order - self.depth);
        let len_minus_1 = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let start = index(order, self.x, self.y) & !len_minus_1;
        (start, start | len_minus_1)
    }

    /// (disjoint from `b`, inside `b`).
    fn relation(self, order: u32, b: &CellBox) -> (bool, bool) {
        let x1 = self.x + (self.side(order) - 1);
        let y1 = self.y + (self.side(order) - 1);
        let disjoint = x1 < b.x0 || self.x > b.x1 || y1 < b.y0 || self.y > b.y1;
        let inside = self.x >= b.x0 && x1 <= b.x1 && self.y >= b.y0 && y1 <= b.y1;
        (disjoint, inside)
    }
}

/// The index intervals (inclusive, sorted, disjoint, non-adjacent) that cover every cell
/// of `b` on the curve of order `order`, at most `budget` of them (at least one).
///
/// A quadtree descent over the curve: the root square is split level by level; squares
/// inside `b` are whole index blocks, squares disjoint from `b` are dropped, and squares
/// partly covered are split again at the next level — as long as the squares kept stay
/// within `16 × budget` (bounded work per box; a cut square is covered whole). Adjacent
/// blocks are merged. If more than `budget` intervals remain, the smallest gaps between
/// consecutive intervals are filled until `budget` remain: of all covers built from these
/// blocks, that is the one with the fewest keys outside `b` (every gap filled adds its
/// length), so the spreading of each interval along the ring reaches as few nodes as the
/// budget allows.
pub fn cover(order: u32, b: &CellBox, budget: usize) -> Vec<(u64, u64)> {
    let order = order.clamp(1, MAX_ORDER);
    let budget = budget.max(1);
    let cap = 16 * budget;
    let mut blocks: Vec<(u64, u64)> = Vec::new();
    let root = Quad { depth: 0, x: 0, y: 0 };
    let mut partial = match root.relation(order, b) {
        (true, _) => return Vec::new(),
        (_, true) => return vec![root.block(order)],
        _ => vec![root],
    };
    while !partial.is_empty() && partial[0].depth < order {
        let mut full_next: Vec<(u64, u64)> = Vec::new();
        let mut partial_next: Vec<Quad> = Vec::new();
        for q in &partial {
            let half = q.side(order) / 2;
            for (dx, dy) in [(0, 0), (0, half), (half, 0), (half, half)] {
                let c = Quad {
                    depth: q.depth + 1,
                    x: q.x + dx,
                    y: q.y + dy,
                };
                match c.relation(order, b) {
                    (true, _) => {}
                    (_, true) => full_next.push(c.block(order)),
                    _ => partial_next.push(c),
                }
            }
        }
        if blocks.len() + full_next.len() + partial_next.len() > cap {
            break;
        }
        blocks.extend(full_next);
        partial = partial_next;
    }
    blocks.extend(partial.iter().map(|q| q.block(order)));
    blocks.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(blocks.len());
    for (lo, hi) in blocks {
        match merged.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(lo) => last.1 = hi,
            _ => merged.push((lo, hi)),
        }
    }
    fill_smallest_gaps(merged, budget)
}

/// Merges sorted, disjoint intervals across their smallest gaps until at most `budget`
/// remain (ties: the earlier gap is filled first).
pub fn fill_smallest_gaps(v: Vec<(u64, u64)>, budget: usize) -> Vec<(u64, u64)> {
    if v.len() <= budget {
        return v;
    }
    // Keep the budget − 1 largest gaps open.
    let mut gaps: Vec<(u64, usize)> = v
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1].0 - w[0].1, i))
        .collect();
    gaps.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut open = vec![false; v.len()];
    for (_, i) in gaps.iter().take(budget - 1) {
        open[*i] = true;
    }
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(budget);
    let mut cur = v[0];
    for (i, next) in v.iter().enumerate().skip(1) {
        if open[i - 1] {
            out.push(cur);
            cur = *next;
        } else {
            cur.1 = next.1;
        }
    }
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn order_1_visits_the_quadrants_in_u_order() {
        // Lower-left, upper-left, upper-right, lower-right.
        assert_eq!(
            [index(1, 0, 0), index(1, 0, 1), index(1, 1, 1), index(1, 1, 0)],
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn order_2_matches_the_drawn_curve() {
        // The order-2 curve drawn by hand from the construction: the lower-left copy is
        // transposed (starts at (0,0) and leaves rightwards), the lower-right copy
        // anti-transposed (ends at (3,0)).
        let path = [
            (0, 0),
            (1, 0),
            (1, 1),
            (0, 1),
            (0, 2),
            (0, 3),
            (1, 3),
            (1, 2),
            (2, 2),
            (2, 3),
            (3, 3),
            (3, 2),
            (3, 1),
            (2, 1),
            (2, 0),
            (3, 0),
        ];
        for (d, (x, y)) in path.iter().enumerate() {
            assert_eq!(index(2, *x, *y), d as u64, "cell ({x},{y})");
        }
    }

    #[test]
    fn small_orders_are_bijections_with_adjacent_steps() {
        for order in 1..=5u32 {
            let n = 1u64 << order;
            let mut cell_of = vec![None; (n * n) as usize];
            for x in 0..n {
                for y in 0..n {
                    let d = index(order, x, y) as usize;
                    assert!(d < cell_of.len(), "index in range");
                    assert!(cell_of[d].is_none(), "order {order}: index {d} hit twice");
                    cell_of[d] = Some((x, y));
                }
            }
            let cells: Vec<(u64, u64)> = cell_of.into_iter().map(|c| c.unwrap()).collect();
            for w in cells.windows(2) {
                let step = w[0].0.abs_diff(w[1].0) + w[0].1.abs_diff(w[1].1);
                assert_eq!(
                    step, 1,
                    "order {order}: {:?} → {:?} is not a unit step",
                    w[0], w[1]
                );
            }
        }
    }

    #[test]
    fn order_32_spans_the_whole_u64_range() {
        let top = (1u64 << 32) - 1;
        assert_eq!(index(32, 0, 0), 0);
        assert_eq!(
            index(32, top, 0),
            u64::MAX,
            "the curve ends at the lower-right corner"
        );
    }

    #[test]
    fn whole_square_and_empty_boxes() {
        let all = CellBox {
            x0: 0,
            x1: 15,
            y0: 0,
            y1: 15,
        };
        assert_eq!(cover(4, &all, 4), vec![(0, 255)]);
        let one = CellBox {
            x0: 3,
            x1: 3,
            y0: 5,
            y1: 5,
        };
        let k = index(4, 3, 5);
        assert_eq!(cover(4, &one, 4), vec![(k, k)]);
    }

    #[test]
    fn gap_filling_keeps_the_largest_gaps() {
        let v = vec![(0, 1), (3, 4), (10, 11), (12 + 1, 14), (40, 41)];
        assert_eq!(fill_smallest_gaps(v.clone(), 5), v);
        assert_eq!(fill_smallest_gaps(v.clone(), 3), vec![(0, 4), (10, 14), (40, 41)]);
        assert_eq!(fill_smallest_gaps(v, 1), vec![(0, 41)]);
    }

    proptest! {
        #[test]
        fn cover_holds_every_cell_of_the_box_within_budget(
            order in 2u32..=6,
            a in 0u64..64, b in 0u64..64, c in 0u64..64, d in 0u64..64,
            budget in 1usize..10,
        ) {
            let n = 1u64 << order;
            let bx = CellBox { x0: a.min(b) % n, x1: a.max(b) % n, y0: c.min(d) % n, y1: c.max(d) % n };
            let bx = CellBox { x1: bx.x1.max(bx.x0), y1: bx.y1.max(bx.y0), ..bx };
            let iv = cover(order, &bx, budget);
            prop_assert!(!iv.is_empty() && iv.len() <= budget);
            for w in iv.windows(2) {
                prop_assert!(w[0].0 <= w[0].1 && w[0].1 + 1 < w[1].0, "sorted, disjoint, not adjacent: {iv:?}");
            }
            let mut inside = 0u64;
            for x in bx.x0..=bx.x1 {
                for y in bx.y0..=bx.y1 {
                    let k = index(order, x, y);
                    prop_assert!(iv.iter().any(|(lo, hi)| (*lo..=*hi).contains(&k)), "cell ({x},{y}) key {k} not in {iv:?}");
                    inside += 1;
                }
            }
            // Brute force: when the budget allows the exact cover, it is exact.
            let mut keys: Vec<u64> = (bx.x0..=bx.x1).flat_map(|x| (bx.y0..=bx.y1).map(move |y| index(order, x, y))).collect();
            keys.sort_unstable();
            let runs = 1 + keys.windows(2).filter(|w| w[1] != w[0] + 1).count();
            let covered: u64 = iv.iter().map(|(lo, hi)| hi - lo + 1).sum();
            if runs <= budget && keys.len() <= 16 * budget {
                prop_assert_eq!(covered, inside, "exact cover expected: {} runs", runs);
            }
        }
    }
}
