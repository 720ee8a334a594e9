//! The subscription cells of a [`super::MatchIndex`], stored eight to a hash-map entry.
//!
//! A subscription is copied into every grid cell its box covers, 54 cells on average in a
//! 64-node `dht` simulation (`crates/sim/PERFORMANCE.md`, twenty-second round), and with
//! one map entry per cell every one of them cost a hash probe, most of them a cache miss,
//! on the way in and again on the way out. Here an entry holds a column of eight cells
//! (the same `x`, eight consecutive `y`), so a box visits one entry per column it crosses
//! in each run of eight rows. Each cell keeps its own list, in the order it had with an
//! entry per cell: the lists, and so every query's answers and their order, are the same.

use std::hash::BuildHasherDefault;

use super::{Cell, CellHasher, HashMap};

/// Cells per map entry, along `y`.
const COLUMN: i32 = 8;

/// The entry holding cell `(x, y)`, and the cell's place in it.
fn column_of((x, y): Cell) -> (Cell, usize) {
    ((x, y.div_euclid(COLUMN)), y.rem_euclid(COLUMN) as usize)
}

/// Grid cells, each a list of `T`, stored a column of eight to a map entry.
#[derive(Clone, Debug)]
pub(super) struct CellColumns<T> {
    columns: HashMap<Cell, [Vec<T>; COLUMN as usize], BuildHasherDefault<CellHasher>>,
}

impl<T> Default for CellColumns<T> {
    fn default() -> Self {
        Self {
            columns: HashMap::default(),
        }
    }
}

impl<T> CellColumns<T> {
    /// The list of cell `c`, if its column holds anything.
    pub(super) fn get(&self, c: Cell) -> Option<&Vec<T>> {
        let (key, i) = column_of(c);
        self.columns.get(&key).map(|column| &column[i])
    }

    /// Visits the cells from `lo` to `hi` (both included), `x` outer and `y` inner, with
    /// one map lookup per column run. With `create`, every cell is visited, its column made
    /// if needed; without, the cells of absent columns are passed as `None`, and a column
    /// left with no entries is dropped after its run.
    pub(super) fn visit(
        &mut self,
        lo: Cell,
        hi: Cell,
        create: bool,
        mut f: impl FnMut(i32, i32, Option<&mut Vec<T>>),
    ) {
        for x in lo.0..=hi.0 {
            let mut y = lo.1;
            loop {
                let ((_, cy), first) = column_of((x, y));
                // The last row of this run: the column's last, or the box's.
                let last = hi.1.min(cy.saturating_mul(COLUMN).saturating_add(COLUMN - 1));
                let key = (x, cy);
                let column = if create {
                    Some(self.columns.entry(key).or_default())
                } else {
                    self.columns.get_mut(&key)
                };
                match column {
                    Some(column) => {
                        for (k, row) in (y..=last).enumerate() {
                            f(x, row, Some(&mut column[first + k]));
                        }
                        if !create && column.iter().all(Vec::is_empty) {
                            self.columns.remove(&key);
                        }
                    }
                    None => (y..=last).for_each(|row| f(x, row, None)),
                }
                if last >= hi.1 {
                    break;
                }
                y = last + 1;
            }
        }
    }

    /// Empties every cell (keeping the columns and their lists' memory).
    pub(super) fn clear_cells(&mut self) {
        for column in self.columns.values_mut() {
            column.iter_mut().for_each(Vec::clear);
        }
    }

    /// Drops the columns whose cells are all empty.
    pub(super) fn drop_empty(&mut self) {
        self.columns
            .retain(|_, column| column.iter().any(|v| !v.is_empty()));
    }

    /// The entries of every cell.
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.columns.values().flatten().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell of a box is visited once, in `x`-then-`y` order, across column edges and
    /// negative coordinates, and each cell keeps its own list.
    #[test]
    fn visits_every_cell_of_a_box_once_in_order() {
        let mut grid = CellColumns::<(i32, i32)>::default();
        for (lo, hi) in [
            ((-3, -17), (2, 9)),
            ((0, 7), (0, 8)),
            ((5, 0), (5, 0)),
            ((-1, -8), (1, -1)),
        ] {
            let mut seen = Vec::new();
            grid.visit(lo, hi, true, |x, y, cell| {
                seen.push((x, y));
                cell.expect("created").push((x, y));
            });
            let expected: Vec<_> = (lo.0..=hi.0)
                .flat_map(|x| (lo.1..=hi.1).map(move |y| (x, y)))
                .collect();
            assert_eq!(seen, expected);
        }
        for x in -3..=5 {
            for y in -17..=9 {
                if let Some(v) = grid.get((x, y)) {
                    assert!(v.iter().all(|&c| c == (x, y)), "{x},{y}: {v:?}");
                }
            }
        }
        assert_eq!(grid.get((0, 8)).map(Vec::len), Some(2));
        assert_eq!(grid.get((40, 40)), None);
    }

    /// A box at the edge of `i32` ends without overflowing.
    #[test]
    fn the_last_rows_of_i32_end_the_visit() {
        let mut grid = CellColumns::<u8>::default();
        let mut n = 0;
        grid.visit((i32::MAX, i32::MAX - 9), (i32::MAX, i32::MAX), true, |_, _, _| {
            n += 1
        });
        assert_eq!(n, 10);
        let mut n = 0;
        grid.visit((i32::MIN, i32::MIN), (i32::MIN, i32::MIN + 9), true, |_, _, _| {
            n += 1
        });
        assert_eq!(n, 10);
    }

    /// Without `create`, absent columns pass `None` and emptied columns are dropped.
    #[test]
    fn emptied_columns_are_dropped() {
        let mut grid = CellColumns::<u8>::default();
        grid.visit((0, 0), (0, 3), true, |_, _, cell| cell.expect("created").push(1));
        assert_eq!(grid.entries(), 4);
        let mut absent = 0;
        grid.visit((0, 0), (0, 9), false, |_, _, cell| match cell {
            Some(v) => {
                v.clear();
            }
            None => absent += 1,
        });
        assert_eq!(absent, 2, "rows 8 and 9 are in a column never made");
        assert_eq!(grid.entries(), 0);
        assert!(grid.columns.is_empty());
    }
}
