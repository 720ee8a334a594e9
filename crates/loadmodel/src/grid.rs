//! The cellular structure over a map (paper `004` §3): square cells of a configurable
//! size, numbered row-major into one sequence ("each cell is assigned a single number,
//! and they are treated as a one-dimensional sequence", §3.1).
//!
//! The default cell is one avatar's bounding box (§3: "no more than one avatar can
//! occupy the same cell at the same time"): [`AVATAR_CELL_SIZE`] = 32 Quake units, the
//! footprint of a Quake player box, the units of worldmesh's model game.

use crate::error::LoadModelError;
use crate::map::Map;

/// Default cell side: one avatar's bounding box in Quake units (32 × 32).
pub const AVATAR_CELL_SIZE: f64 = 32.0;
/// Largest accepted number of cells in a grid.
pub const MAX_CELLS: usize = 4_000_000;

/// A grid of `nx × ny` square cells of side `cell_size` covering `[0, nx·cs] × [0, ny·cs]`.
/// Cell `i` is at column `i % nx`, row `i / nx`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// Side of a cell (world units).
    pub cell_size: f64,
    /// Columns (x).
    pub nx: usize,
    /// Rows (y).
    pub ny: usize,
}

impl Grid {
    /// A grid of `nx × ny` cells.
    pub fn new(cell_size: f64, nx: usize, ny: usize) -> Result<Self, LoadModelError> {
        if !(cell_size.is_finite() && cell_size > 0.0) {
            return Err(LoadModelError::spec(
                format!("cell size {cell_size}"),
                "must be positive",
            ));
        }
        let n = nx.saturating_mul(ny);
        if n == 0 {
            return Err(LoadModelError::Empty("a grid needs at least one cell".into()));
        }
        if n > MAX_CELLS {
            return Err(LoadModelError::TooLarge {
                what: "grid cells",
                size: n,
                limit: MAX_CELLS,
            });
        }
        Ok(Self { cell_size, nx, ny })
    }

    /// The grid covering `map` with cells of side `cell_size` (the last row and column
    /// may overhang the map edge).
    pub fn for_map(map: &Map, cell_size: f64) -> Result<Self, LoadModelError> {
        if !(cell_size.is_finite() && cell_size > 0.0) {
            return Err(LoadModelError::spec(
                format!("cell size {cell_size}"),
                "must be positive",
            ));
        }
        let count = |side: f64| -> usize {
            let c = (side / cell_size).ceil();
            if c > MAX_CELLS as f64 {
                MAX_CELLS + 1
            } else {
                (c as usize).max(1)
            }
        };
        Self::new(cell_size, count(map.width), count(map.height))
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.nx * self.ny
    }

    /// Always false: a grid has at least one cell.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Column and row of cell `i`.
    pub fn coords(&self, i: usize) -> (usize, usize) {
        (i % self.nx, i / self.nx)
    }

    /// Centre of cell `i`.
    pub fn center(&self, i: usize) -> (f64, f64) {
        let (x, y) = self.coords(i);
        (
            (x as f64 + 0.5) * self.cell_size,
            (y as f64 + 0.5) * self.cell_size,
        )
    }

    /// The cell holding `(x, y)`, if it lies on the grid (the far edges belong to the
    /// last cells).
    pub fn cell_of(&self, x: f64, y: f64) -> Option<usize> {
        if !(x.is_finite() && y.is_finite()) || x < 0.0 || y < 0.0 {
            return None;
        }
        let (cx, cy) = ((x / self.cell_size) as usize, (y / self.cell_size) as usize);
        let cx = if cx == self.nx && x <= self.nx as f64 * self.cell_size {
            cx - 1
        } else {
            cx
        };
        let cy = if cy == self.ny && y <= self.ny as f64 * self.cell_size {
            cy - 1
        } else {
            cy
        };
        (cx < self.nx && cy < self.ny).then_some(cy * self.nx + cx)
    }

    /// Which cells are occupiable: centre on the map and outside every obstacle.
    pub fn free_cells(&self, map: &Map) -> Vec<bool> {
        (0..self.len())
            .map(|i| {
                let (x, y) = self.center(i);
                map.is_free(x, y)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_and_lookup_agree() {
        let g = Grid::new(10.0, 4, 3).unwrap();
        assert_eq!(g.len(), 12);
        assert_eq!(g.center(5), (15.0, 15.0));
        assert_eq!(g.cell_of(15.0, 15.0), Some(5));
        assert_eq!(g.cell_of(40.0, 30.0), Some(11));
        assert_eq!(g.cell_of(40.1, 3.0), None);
        assert_eq!(g.cell_of(-0.1, 3.0), None);
        assert_eq!(g.cell_of(f64::NAN, 3.0), None);
        for i in 0..g.len() {
            let (x, y) = g.center(i);
            assert_eq!(g.cell_of(x, y), Some(i));
        }
    }

    #[test]
    fn covers_the_map_and_marks_obstacles() {
        let map = Map::with_boxes(95.0, 40.0, &[(0.0, 0.0, 20.0, 20.0)]).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        assert_eq!((g.nx, g.ny), (10, 4));
        let free = g.free_cells(&map);
        assert!(!free[0] && !free[1] && !free[10] && free[2]);
        // Last column centre (95.0) is on the edge: free.
        assert!(free[9]);
        assert!(Grid::for_map(&map, 0.0).is_err());
        assert!(matches!(
            Grid::new(1.0, 1 << 20, 1 << 20),
            Err(LoadModelError::TooLarge { .. })
        ));
    }
}
