//! The incremental `MC`/`MP` structure of paper `002` §3.1, kept up to date instead of
//! rebuilt per event (the improvement the paper proposes in §5).
//!
//! For every ordered mirror pair `(i, j)`, `i ≠ j`, a min-heap holds the players on `i`
//! keyed by `d(p, j) − d(p, i)`: the change in total delay if `p` moved from `i` to `j`.
//! Its top is `(MC[i][j], MP[i][j])`, the paper's cheapest move and its player (Fig. 3 of
//! the paper prints the two arrays under swapped captions).
//!
//! Deletion is lazy: each player slot carries a *stamp* that changes whenever the player
//! is removed from a mirror, and heap entries with an old stamp are skipped (and dropped
//! when they reach the top). A dense `m × m` cache holds every heap's valid top, so reading
//! `MC`/`MP` is `O(1)` and cache-friendly. Placing a player on mirror `i` is `m − 1` heap
//! pushes (`O(log n)` each, `O(1)` on average); removing it is `O(m)`, plus re-finding the
//! top (`O(log n)` per stale entry dropped) in the heaps where it was the top. A heap is
//! compacted when more than half of it is stale (thresholds staggered per heap by up to a
//! quarter), which bounds memory to at most 2.5 times the live entries.

use crate::Micros;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A cheapest move between two mirrors: its cost change and the player's internal slot.
pub(crate) type Edge = (Micros, u32);

/// A heap entry: key, slot, stamp of the placement it belongs to.
type Entry = Reverse<(Micros, u32, u32)>;

/// Per-pair heaps of candidate moves with lazy deletion.
#[derive(Clone, Debug)]
pub(crate) struct MoveIndex {
    m: usize,
    heaps: Vec<BinaryHeap<Entry>>,
    live: Vec<u32>,
    /// Current stamp of each slot; entries with another stamp are stale.
    stamp: Vec<u32>,
    /// The valid top of every heap (`NONE` if empty).
    top: Vec<Edge>,
}

/// Sentinel for "no player on the source mirror".
const NONE: Edge = (Micros::MAX, u32::MAX);

impl MoveIndex {
    /// An empty index for `m` mirrors.
    pub(crate) fn new(m: usize) -> Self {
        Self {
            m,
            heaps: vec![BinaryHeap::new(); m * m],
            live: vec![0; m * m],
            stamp: Vec::new(),
            top: vec![NONE; m * m],
        }
    }

    /// Registers the player in slot `slot` with delay row `row` as assigned to `mirror`.
    pub(crate) fn insert(&mut self, slot: u32, mirror: usize, row: &[Micros]) {
        let s = slot as usize;
        if s >= self.stamp.len() {
            self.stamp.resize(s + 1, 0);
        }
        let st = self.stamp[s];
        let here = row[mirror];
        for (j, &d) in row.iter().enumerate() {
            if j == mirror {
                continue;
            }
            let k = mirror * self.m + j;
            self.heaps[k].push(Reverse((d - here, slot, st)));
            self.live[k] += 1;
            if (d - here, slot) < self.top[k] {
                self.top[k] = (d - here, slot);
            }
            // The heaps (i, ·) all gain a stale entry whenever a player leaves mirror i, so
            // equal thresholds would compact all m − 1 of them in the same event; a
            // per-heap offset spreads that work over many events.
            let live = self.live[k] as usize;
            if self.heaps[k].len() > 2 * live + 32 + (live / 2) * ((k * 37) % 64) / 64 {
                self.compact(k);
            }
        }
    }

    /// Removes the player in slot `slot` from `mirror` (its entries become stale).
    pub(crate) fn remove(&mut self, slot: u32, mirror: usize) {
        for j in 0..self.m {
            if j != mirror {
                self.live[mirror * self.m + j] -= 1;
            }
        }
        let s = slot as usize;
        if self.stamp[s] == u32::MAX {
            // Before a stamp could repeat, drop every stale entry everywhere.
            self.stamp[s] = 0;
            for k in 0..self.heaps.len() {
                let st = &self.stamp;
                self.heaps[k].retain(|Reverse((_, p, t))| st[*p as usize] == *t && *p != slot);
            }
        } else {
            self.stamp[s] += 1;
        }
        for j in 0..self.m {
            let k = mirror * self.m + j;
            if j != mirror && self.top[k].1 == slot {
                self.top[k] = self.valid_top(k);
            }
        }
    }

    fn compact(&mut self, k: usize) {
        let st = &self.stamp;
        self.heaps[k].retain(|Reverse((_, p, t))| st[*p as usize] == *t);
    }

    /// Drops stale entries from the top of heap `k` and returns the valid top.
    fn valid_top(&mut self, k: usize) -> Edge {
        while let Some(&Reverse((c, p, t))) = self.heaps[k].peek() {
            if self.stamp[p as usize] == t {
                return (c, p);
            }
            self.heaps[k].pop();
        }
        NONE
    }

    /// `(MC[i][j], MP[i][j])`, or `None` when mirror `i` has no players.
    #[inline]
    pub(crate) fn best(&self, i: usize, j: usize) -> Option<Edge> {
        let e = self.top[i * self.m + j];
        (e.1 != u32::MAX).then_some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tops_follow_inserts_and_lazy_removals() {
        let mut ix = MoveIndex::new(3);
        // slot 0 on mirror 0 with delays (5, 1, 9): moving to 1 saves 4, to 2 costs 4
        ix.insert(0, 0, &[5, 1, 9]);
        ix.insert(1, 0, &[5, 3, 2]);
        assert_eq!(ix.best(0, 1), Some((-4, 0)));
        assert_eq!(ix.best(0, 2), Some((-3, 1)));
        assert_eq!(ix.best(1, 0), None);
        ix.remove(0, 0);
        assert_eq!(ix.best(0, 1), Some((-2, 1)), "next best after the top left");
        ix.insert(0, 1, &[5, 1, 9]);
        assert_eq!(ix.best(1, 0), Some((4, 0)));
        assert_eq!(
            ix.best(0, 1),
            Some((-2, 1)),
            "slot 0's stale entry on mirror 0 is ignored"
        );
        ix.remove(1, 0);
        assert_eq!(ix.best(0, 1), None);
        assert_eq!(ix.best(0, 2), None);
    }

    #[test]
    fn heaps_are_compacted() {
        let mut ix = MoveIndex::new(2);
        for round in 0..1000u32 {
            ix.insert(0, 0, &[0, i64::from(round)]);
            ix.remove(0, 0);
        }
        assert!(
            ix.heaps[1].len() <= 33,
            "stale entries bounded: {}",
            ix.heaps[1].len()
        );
        assert_eq!(ix.best(0, 1), None);
    }
}
