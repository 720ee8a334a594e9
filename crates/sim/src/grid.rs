//! A uniform grid of cells, each holding a list: the spatial index of the oracle locator
//! and of the metrics collector.
//!
//! Cells are addressed by integer coordinates, as a `HashMap<(i32, i32), Vec<T>>` would
//! be, and behave the same (a cell never written is empty; a list keeps its order), but
//! the cells of the region in use live in one dense vector, found by arithmetic instead of
//! hashing. The dense region grows to take new cells (doubling, so growth is rare); cells
//! too far out for it (a stray coordinate) go to a hash map beside it.

use worldmesh_core::hash::FastMap as HashMap;

/// Most cells of the dense region (beyond it, cells are hashed).
const MAX_DENSE: i64 = 1 << 22;

/// Lists of `T` by cell.
pub(crate) struct CellGrid<T> {
    /// The dense region: `nx × ny` cells from `(x0, y0)`, row by row.
    x0: i32,
    y0: i32,
    nx: i32,
    ny: i32,
    dense: Vec<Vec<T>>,
    /// Cells outside the dense region.
    far: HashMap<(i32, i32), Vec<T>>,
}

impl<T> Default for CellGrid<T> {
    fn default() -> Self {
        Self {
            x0: 0,
            y0: 0,
            nx: 0,
            ny: 0,
            dense: Vec::new(),
            far: HashMap::default(),
        }
    }
}

impl<T> CellGrid<T> {
    /// Where cell `c` is in the dense region, if it is there.
    #[inline]
    fn index(&self, (x, y): (i32, i32)) -> Option<usize> {
        // A coordinate below the region's start wraps to above any extent (one comparison
        // per axis): the differences fit in 33 bits, the extents are at most 2²² cells.
        let dx = (i64::from(x) - i64::from(self.x0)) as u64;
        let dy = (i64::from(y) - i64::from(self.y0)) as u64;
        let (nx, ny) = (self.nx as u64, self.ny as u64);
        (dx < nx && dy < ny).then(|| (dx + dy * nx) as usize)
    }

    /// The list of cell `c` (empty if nothing was ever put there).
    pub(crate) fn get(&self, c: (i32, i32)) -> &[T] {
        match self.index(c) {
            Some(i) => &self.dense[i],
            None => self.far.get(&c).map_or(&[], Vec::as_slice),
        }
    }

    /// The list of cell `c`, if the cell was ever written.
    pub(crate) fn get_mut(&mut self, c: (i32, i32)) -> Option<&mut Vec<T>> {
        match self.index(c) {
            Some(i) => Some(&mut self.dense[i]),
            None => self.far.get_mut(&c),
        }
    }

    /// The list of cell `c`, created empty if needed.
    pub(crate) fn entry(&mut self, c: (i32, i32)) -> &mut Vec<T> {
        let at = self.index(c).or_else(|| {
            self.grow_to(c);
            self.index(c)
        });
        match at {
            Some(i) => &mut self.dense[i],
            None => self.far.entry(c).or_default(),
        }
    }

    /// Empties every list, keeping their allocations.
    pub(crate) fn clear(&mut self) {
        self.dense.iter_mut().for_each(Vec::clear);
        self.far.values_mut().for_each(Vec::clear);
    }

    /// Every list (in no particular order).
    #[cfg(test)]
    pub(crate) fn lists(&self) -> impl Iterator<Item = &Vec<T>> {
        self.dense.iter().chain(self.far.values())
    }

    /// Grows the dense region to take cell `c` (with room around it), unless that would
    /// make it too large: then `c` stays a far cell.
    fn grow_to(&mut self, (x, y): (i32, i32)) {
        let (x, y) = (i64::from(x), i64::from(y));
        let (ox0, oy0, onx, ony) = (
            i64::from(self.x0),
            i64::from(self.y0),
            i64::from(self.nx),
            i64::from(self.ny),
        );
        let (x0, x1, y0, y1) = if self.dense.is_empty() {
            (x - 8, x + 8, y - 8, y + 8)
        } else {
            // Double the extent on the side that needs it.
            let (mut x0, mut x1, mut y0, mut y1) = (ox0, ox0 + onx - 1, oy0, oy0 + ony - 1);
            if x < x0 {
                x0 = x.min(x0 - onx);
            }
            if x > x1 {
                x1 = x.max(x1 + onx);
            }
            if y < y0 {
                y0 = y.min(y0 - ony);
            }
            if y > y1 {
                y1 = y.max(y1 + ony);
            }
            (x0, x1, y0, y1)
        };
        let (nx, ny) = (x1 - x0 + 1, y1 - y0 + 1);
        let fits = |v: i64| i64::from(i32::MIN) <= v && v <= i64::from(i32::MAX);
        if nx.saturating_mul(ny) > MAX_DENSE || ![x0, x1, y0, y1].into_iter().all(fits) {
            return;
        }
        let mut dense: Vec<Vec<T>> = std::iter::repeat_with(Vec::new)
            .take((nx * ny) as usize)
            .collect();
        for (i, list) in std::mem::take(&mut self.dense).into_iter().enumerate() {
            let i = i as i64;
            let (cx, cy) = (ox0 + i % onx, oy0 + i / onx);
            dense[((cx - x0) + (cy - y0) * nx) as usize] = list;
        }
        (self.x0, self.y0, self.nx, self.ny) = (x0 as i32, y0 as i32, nx as i32, ny as i32);
        self.dense = dense;
        // Far cells now inside the dense region move in.
        let far: Vec<(i32, i32)> = self
            .far
            .keys()
            .copied()
            .filter(|c| self.index(*c).is_some())
            .collect();
        for c in far {
            if let (Some(list), Some(i)) = (self.far.remove(&c), self.index(c)) {
                self.dense[i] = list;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid answers like a hash map of lists, wherever the cells are.
    #[test]
    fn behaves_like_a_map_of_lists() {
        let mut g: CellGrid<u32> = CellGrid::default();
        let mut m: std::collections::HashMap<(i32, i32), Vec<u32>> = Default::default();
        let mut rng = worldmesh_core::DetRng::new(7);
        let far = [i32::MIN, -3_000_000, -1, 0, 5, 40, 3_000_000, i32::MAX];
        for k in 0..5000u32 {
            let c = if k % 50 == 0 {
                (far[rng.index(far.len())], far[rng.index(far.len())])
            } else {
                (rng.index(200) as i32 - 60, rng.index(30) as i32 - 10)
            };
            match rng.index(4) {
                0 | 1 => {
                    g.entry(c).push(k);
                    m.entry(c).or_default().push(k);
                }
                2 => {
                    if let Some(v) = g.get_mut(c) {
                        v.retain(|x| x % 3 != 0);
                    }
                    if let Some(v) = m.get_mut(&c) {
                        v.retain(|x| x % 3 != 0);
                    }
                }
                _ => assert_eq!(g.get(c), m.get(&c).map_or(&[][..], Vec::as_slice)),
            }
        }
        for (c, v) in &m {
            assert_eq!(g.get(*c), v.as_slice());
        }
        let total: usize = g.lists().map(Vec::len).sum();
        assert_eq!(total, m.values().map(Vec::len).sum::<usize>());
        g.clear();
        assert!(g.lists().all(Vec::is_empty));
    }
}
