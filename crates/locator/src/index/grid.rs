//! The subscription cells of a [`super::MatchIndex`], stored eight to a hash-map entry.
//!
//! A subscription is copied into every grid cell its box covers (54 cells on average in a
//! 64-node `dht` simulation on the publications' grid, `crates/sim/PERFORMANCE.md`,
//! twenty-second round; 6.5 on the coarser grid the subscriptions now have), and with
//! one map entry per cell every one of them cost a hash probe, most of them a cache miss,
//! on the way in and again on the way out. Here an entry holds a column of eight cells
//! (the same `x`, eight consecutive `y`), so a box visits one entry per column it crosses
//! in each run of eight rows. Each cell keeps its own list, in the order it had with an
//! entry per cell: the lists, and so every query's answers and their order, are the same.

use std::hash::BuildHasherDefault;
use std::ops::RangeInclusive;

use super::{Cell, CellHasher, HashMap};

/// Cells per map entry, along `y`.
const COLUMN: i32 = 8;

/// The entry holding cell `(x, y)`, and the cell's place in it.
fn column_of((x, y): Cell) -> (Cell, usize) {
    ((x, y.div_euclid(COLUMN)), y.rem_euclid(COLUMN) as usize)
}

/// The cells from `lo` to `hi` (both included), `x` outer and `y` inner, as runs of rows
/// within one column: the column's key, the first row's place in it, and the rows.
fn runs(lo: Cell, hi: Cell) -> impl Iterator<Item = (Cell, usize, RangeInclusive<i32>)> {
    (lo.0..=hi.0).flat_map(move |x| {
        let first = (lo.1 <= hi.1).then_some(lo.1);
        std::iter::successors(first.map(|y| run_from(x, y, hi.1)), move |(_, _, rows)| {
            (*rows.end() < hi.1).then(|| run_from(x, rows.end() + 1, hi.1))
        })
    })
}

/// The run of rows from `y` to the end of its column or to `last`, whichever comes first.
fn run_from(x: i32, y: i32, last: i32) -> (Cell, usize, RangeInclusive<i32>) {
    let ((_, cy), first) = column_of((x, y));
    let end = last.min(cy.saturating_mul(COLUMN).saturating_add(COLUMN - 1));
    ((x, cy), first, y..=end)
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

    /// Appends `item` to every cell from `lo` to `hi` (both included), `x` outer and `y`
    /// inner, making columns as needed, and records in `slots` where it went in each cell,
    /// in that order.
    pub(super) fn push_all(&mut self, lo: Cell, hi: Cell, item: T, slots: &mut Vec<u32>)
    where
        T: Copy,
    {
        for (key, first, rows) in runs(lo, hi) {
            let column = self.columns.entry(key).or_default();
            for cell in &mut column[first..first + rows.count()] {
                slots.push(cell.len() as u32);
                cell.push(item);
            }
        }
    }

    /// Visits the cells from `lo` to `hi` in the order of [`CellColumns::push_all`], the
    /// cells of absent columns as `None`; a column left with no entries is dropped after
    /// its run.
    pub(super) fn visit_existing(
        &mut self,
        lo: Cell,
        hi: Cell,
        mut f: impl FnMut(i32, i32, Option<&mut Vec<T>>),
    ) {
        for (key, first, rows) in runs(lo, hi) {
            let x = key.0;
            match self.columns.get_mut(&key) {
                Some(column) => {
                    for (k, row) in rows.enumerate() {
                        f(x, row, Some(&mut column[first + k]));
                    }
                    if column.iter().all(Vec::is_empty) {
                        self.columns.remove(&key);
                    }
                }
                None => rows.for_each(|row| f(x, row, None)),
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
    /// negative coordinates, by both walks, and the slots `push_all` records are where each
    /// cell holds the item.
    #[test]
    fn both_walks_visit_every_cell_of_a_box_once_in_order() {
        let mut grid = CellColumns::<usize>::default();
        let boxes = [
            ((-3, -17), (2, 9)),
            ((0, 7), (0, 8)),
            ((5, 0), (5, 0)),
            ((-1, -8), (1, -1)),
        ];
        for (i, &(lo, hi)) in boxes.iter().enumerate() {
            let mut slots = Vec::new();
            grid.push_all(lo, hi, i, &mut slots);
            let expected: Vec<_> = (lo.0..=hi.0)
                .flat_map(|x| (lo.1..=hi.1).map(move |y| (x, y)))
                .collect();
            assert_eq!(slots.len(), expected.len());
            let mut seen = Vec::new();
            grid.visit_existing(lo, hi, |x, y, cell| {
                let cell = cell.expect("made by push_all");
                assert_eq!(cell[slots[seen.len()] as usize], i, "{x},{y}");
                seen.push((x, y));
            });
            assert_eq!(seen, expected);
        }
        assert_eq!(grid.get((0, 8)), Some(&vec![0, 1]));
        assert_eq!(grid.get((40, 40)), None);
    }

    /// A box at the edge of `i32` ends without overflowing.
    #[test]
    fn the_last_rows_of_i32_end_the_walk() {
        let mut grid = CellColumns::<u8>::default();
        let mut slots = Vec::new();
        grid.push_all((i32::MAX, i32::MAX - 9), (i32::MAX, i32::MAX), 1, &mut slots);
        assert_eq!(slots.len(), 10);
        slots.clear();
        grid.push_all((i32::MIN, i32::MIN), (i32::MIN, i32::MIN + 9), 1, &mut slots);
        assert_eq!(slots.len(), 10);
    }

    /// Absent columns pass `None`, and emptied columns are dropped.
    #[test]
    fn emptied_columns_are_dropped() {
        let mut grid = CellColumns::<u8>::default();
        grid.push_all((0, 0), (0, 3), 1, &mut Vec::new());
        assert_eq!(grid.entries(), 4);
        let mut absent = 0;
        grid.visit_existing((0, 0), (0, 9), |_, _, cell| match cell {
            Some(v) => v.clear(),
            None => absent += 1,
        });
        assert_eq!(absent, 2, "rows 8 and 9 are in a column never made");
        assert_eq!(grid.entries(), 0);
        assert!(grid.columns.is_empty());
    }
}
