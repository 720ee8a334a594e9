//! The incremental `MC`/`MP` structure of paper `002` §3.1, kept up to date instead of
//! rebuilt per event (the improvement the paper proposes in §5).
//!
//! For every ordered mirror pair `(i, j)`, `i ≠ j`, an ordered set holds the players on `i`
//! keyed by `d(p, j) − d(p, i)`: the change in total delay if `p` moved from `i` to `j`.
//! Its first element is `(MC[i][j], MP[i][j])` (the paper's cheapest move and its player;
//! note that Fig. 3 of the paper prints the two arrays under swapped captions). A dense
//! `m × m` cache of those first elements makes each lookup `O(1)`.
//!
//! Adding or removing a player on mirror `i` touches the `m − 1` sets `(i, ·)`, each in
//! `O(log n)`; a chain of `k ≤ m` moves therefore costs `O(k · m · log n)`.

use crate::Micros;
use std::collections::BTreeSet;

/// A cheapest move between two mirrors: its cost change and the player's internal slot.
pub(crate) type Edge = (Micros, u32);

/// Sentinel for "no player on the source mirror".
const NONE: Edge = (Micros::MAX, u32::MAX);

/// Per-pair ordered sets of candidate moves, plus the cache of their minima.
#[derive(Clone, Debug)]
pub(crate) struct MoveIndex {
    m: usize,
    sets: Vec<BTreeSet<Edge>>,
    best: Vec<Edge>,
}

impl MoveIndex {
    /// An empty index for `m` mirrors.
    pub(crate) fn new(m: usize) -> Self {
        Self {
            m,
            sets: vec![BTreeSet::new(); m * m],
            best: vec![NONE; m * m],
        }
    }

    /// Registers the player in slot `slot` with delay row `row` as assigned to `mirror`.
    pub(crate) fn insert(&mut self, slot: u32, mirror: usize, row: &[Micros]) {
        let here = row[mirror];
        for (j, &d) in row.iter().enumerate() {
            if j == mirror {
                continue;
            }
            let k = mirror * self.m + j;
            let e = (d - here, slot);
            self.sets[k].insert(e);
            if e < self.best[k] {
                self.best[k] = e;
            }
        }
    }

    /// Removes the player in slot `slot` (delay row `row`) from `mirror`.
    pub(crate) fn remove(&mut self, slot: u32, mirror: usize, row: &[Micros]) {
        let here = row[mirror];
        for (j, &d) in row.iter().enumerate() {
            if j == mirror {
                continue;
            }
            let k = mirror * self.m + j;
            let e = (d - here, slot);
            self.sets[k].remove(&e);
            if e == self.best[k] {
                self.best[k] = self.sets[k].first().copied().unwrap_or(NONE);
            }
        }
    }

    /// `(MC[i][j], MP[i][j])`, or `None` when mirror `i` has no players.
    #[inline]
    pub(crate) fn best(&self, i: usize, j: usize) -> Option<Edge> {
        let e = self.best[i * self.m + j];
        (e.1 != u32::MAX).then_some(e)
    }
}
