//! A queue of deadlines for entries kept elsewhere, earliest first.
//!
//! Protocol cores expire entries at given times: the distributed locator's cached
//! matches, matches told and pushes asked for, the subscriptions and publications stored at
//! a rendezvous, the replica manager's peers watched for silence. Finding the few expired
//! entries by testing every entry at every check costs time that grows with the number of
//! entries (`crates/sim/PERFORMANCE.md`, tenth and eleventh rounds). A [`DeadlineQueue`]
//! holds `(deadline, key)` pairs instead. A check pops the pairs whose deadline has come
//! and tests each key against the entry's current state, which its owner keeps: an entry
//! refreshed since has its later deadline queued too and is kept, an entry removed since
//! is skipped. Pairs are never removed otherwise, so refreshes leave stale pairs behind;
//! [`DeadlineQueue::compact`] rebuilds the queue from the live entries once stale pairs
//! dominate it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::Time;

/// `(deadline, key)` pairs, popped earliest first (ties by key): see the module
/// documentation.
#[derive(Debug, Clone)]
pub struct DeadlineQueue<K> {
    heap: BinaryHeap<Reverse<(Time, K)>>,
}

impl<K> Default for DeadlineQueue<K> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
        }
    }
}

impl<K: Ord> DeadlineQueue<K> {
    /// Queues `key`'s deadline `at`. Call it whenever an entry is inserted or its deadline
    /// changes; an earlier pair of the same key stays queued (stale).
    pub fn push(&mut self, at: Time, key: K) {
        self.heap.push(Reverse((at, key)));
    }

    /// Removes and returns the earliest pair if its deadline is at or before `now`.
    pub fn pop_due(&mut self, now: Time) -> Option<(Time, K)> {
        self.pop_if(|at| at <= now)
    }

    /// Removes and returns the earliest pair if its deadline is strictly before `now`.
    pub fn pop_before(&mut self, now: Time) -> Option<(Time, K)> {
        self.pop_if(|at| at < now)
    }

    fn pop_if(&mut self, due: impl FnOnce(Time) -> bool) -> Option<(Time, K)> {
        let Reverse((at, _)) = self.heap.peek()?;
        if !due(*at) {
            return None;
        }
        self.heap.pop().map(|Reverse(pair)| pair)
    }

    /// Pairs queued, stale ones included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True if no pair is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Rebuilds the queue from `live()` (one pair per live entry, with its current
    /// deadline) if it holds more than `4 × live_len + 64` pairs, i.e. once stale pairs
    /// dominate it; so the queue stays within a constant factor of the entries, however
    /// often they are refreshed. Pops give the same live entries afterwards, provided
    /// `live_len` and `live()` describe the same entries.
    pub fn compact<I: IntoIterator<Item = (Time, K)>>(&mut self, live_len: usize, live: impl FnOnce() -> I) {
        if self.heap.len() > 4 * live_len + 64 {
            self.heap = live().into_iter().map(Reverse).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pushes and pops in any order: each pop returns the least queued pair exactly when
        /// its deadline is due (at or before, or strictly before, `now`), as a sorted list
        /// of the pairs would.
        #[test]
        fn pops_the_least_pair_when_it_is_due(
            steps in proptest::collection::vec((0u8..3, 0u64..50, 0u8..8), 1..300)
        ) {
            let mut queue = DeadlineQueue::default();
            let mut model: Vec<(Time, u8)> = Vec::new();
            for (op, t, key) in steps {
                let t = Time::from_micros(t);
                match op {
                    0 => {
                        queue.push(t, key);
                        model.push((t, key));
                    }
                    _ => {
                        model.sort_unstable();
                        let due = model.first().is_some_and(|&(at, _)| if op == 1 { at <= t } else { at < t });
                        let want = due.then(|| model.remove(0));
                        let got = if op == 1 { queue.pop_due(t) } else { queue.pop_before(t) };
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(queue.len(), model.len());
            }
        }
    }

    /// `compact` leaves the queue alone up to its bound, without asking for the live
    /// pairs, and replaces it by exactly the pairs `live` gives beyond (pairs that were
    /// not queued: a rebuild that kept or dropped queued pairs instead would show).
    #[test]
    fn compacts_only_past_the_bound() {
        for live in 0..20usize {
            for stale in 0..200usize {
                let mut queue = DeadlineQueue::default();
                for k in 0..stale + live {
                    queue.push(Time::from_micros(k as u64), k);
                }
                let pairs: Vec<(Time, usize)> = (0..live)
                    .map(|k| (Time::from_micros(5_000 - k as u64), 1_000 + k))
                    .collect();
                let mut asked = false;
                queue.compact(live, || {
                    asked = true;
                    pairs.clone()
                });
                let past = stale + live > 4 * live + 64;
                assert_eq!(asked, past, "{stale} stale, {live} live");
                let mut popped = Vec::new();
                while let Some(p) = queue.pop_due(Time::MAX) {
                    popped.push(p);
                }
                if past {
                    let mut want = pairs.clone();
                    want.sort_unstable();
                    assert_eq!(popped, want, "{stale} stale, {live} live");
                } else {
                    let want: Vec<(Time, usize)> = (0..stale + live)
                        .map(|k| (Time::from_micros(k as u64), k))
                        .collect();
                    assert_eq!(popped, want, "{stale} stale, {live} live");
                }
            }
        }
    }
}
