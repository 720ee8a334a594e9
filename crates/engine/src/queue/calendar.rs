//! A calendar of keys: the near future cut into buckets of about a millisecond.
//!
//! Most events a simulation schedules are due within a few hundred milliseconds (datagram
//! deliveries, machine wake-ups), so a ring of [`BUCKETS`] buckets, each [`WIDTH_US`] wide,
//! holds nearly all of them. A key goes into its bucket unsorted, in constant time; the
//! front bucket (the earliest non-empty one) is kept sorted, latest first, so the earliest
//! key is its last. A bucket is sorted once, when the front reaches it, and a millisecond
//! of a simulated world holds few events next to all those in flight (a few dozen datagram
//! deliveries at 64 nodes, a few hundred at 512), so taking a key costs a few comparisons
//! where a heap of every event in flight sifted through all its levels
//! (`crates/sim/PERFORMANCE.md`, twentieth round).
//!
//! The calendar only takes keys its window of [`BUCKETS`] buckets can hold: the queue
//! keeps the others (due further ahead) in its heap and compares the two fronts.

use super::{Key, before, order};

/// A bucket's width, µs (a power of two: the division is a shift).
pub(super) const WIDTH_US: u64 = 1 << 10;
/// Buckets in the ring: a window of about half a second.
pub(super) const BUCKETS: usize = 512;

/// Keys due within a window of [`BUCKETS`] buckets.
///
/// Invariants, when the calendar is not empty: every key's bucket number (its time divided
/// by [`WIDTH_US`]) lies in `front ..= last`, and `last - front < BUCKETS`, so each ring
/// slot holds the keys of one bucket number; the front's slot is not empty and is sorted
/// latest first; `last` is the latest key's bucket number.
#[derive(Debug)]
pub(super) struct Calendar {
    /// The buckets, by bucket number modulo [`BUCKETS`].
    ring: Vec<Vec<Key>>,
    /// The earliest key's bucket number.
    front: u64,
    /// The latest key's bucket number.
    last: u64,
    /// The bucket number of the key the queue gave out last: an empty calendar takes keys
    /// up to [`BUCKETS`] buckets after it, so that one key far ahead, pushed when nothing
    /// else waits, does not send the whole near future to the heap.
    present: u64,
    /// Keys held.
    len: usize,
}

impl Default for Calendar {
    fn default() -> Self {
        Self {
            ring: std::iter::repeat_with(Vec::new).take(BUCKETS).collect(),
            front: 0,
            last: 0,
            present: 0,
            len: 0,
        }
    }
}

/// The bucket number of `key`.
fn bucket(key: &Key) -> u64 {
    key.0.0 / WIDTH_US
}

/// The ring slot of bucket number `b`.
fn slot(b: u64) -> usize {
    // The remainder is below `BUCKETS`, so it fits.
    (b % BUCKETS as u64) as usize
}

impl Calendar {
    /// Keys held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The earliest key.
    pub(super) fn peek(&self) -> Option<&Key> {
        if self.len == 0 {
            return None;
        }
        self.ring[slot(self.front)].last()
    }

    /// Takes `key` if the window can hold it, else hands it back. The window stretches
    /// either way while it spans fewer than [`BUCKETS`] buckets (a key put back before the
    /// front moves the front back); an empty calendar takes a key due less than
    /// [`BUCKETS`] buckets after the present (see [`Calendar::passed`]).
    pub(super) fn push(&mut self, key: Key) -> Result<(), Key> {
        let b = bucket(&key);
        let window = BUCKETS as u64;
        if self.len == 0 {
            if b >= self.present.saturating_add(window) {
                return Err(key);
            }
            (self.front, self.last) = (b, b);
        } else if self.last.max(b) - self.front.min(b) >= window {
            return Err(key);
        } else {
            // A new front's slot is empty: every key lies within the window after it.
            self.front = self.front.min(b);
            self.last = self.last.max(b);
        }
        let list = &mut self.ring[slot(b)];
        if b == self.front {
            // Latest first: the keys due after `key` come before it.
            let at = list.partition_point(|k| before(&key, k));
            list.insert(at, key);
        } else {
            list.push(key);
        }
        self.len += 1;
        Ok(())
    }

    /// The queue gave out `key` (from the calendar or the heap): the present for an empty
    /// calendar's window.
    pub(super) fn passed(&mut self, key: &Key) {
        self.present = bucket(key);
    }

    /// Removes the earliest key; the front moves on to the next non-empty bucket, which is
    /// sorted then.
    pub(super) fn pop(&mut self) -> Option<Key> {
        if self.len == 0 {
            return None;
        }
        let key = self.ring[slot(self.front)].pop()?;
        self.len -= 1;
        if self.len > 0 && self.ring[slot(self.front)].is_empty() {
            // Every key lies within the window after the front: the walk ends there.
            loop {
                self.front += 1;
                if !self.ring[slot(self.front)].is_empty() {
                    break;
                }
            }
            // Keys are unique, so an unstable sort has one result.
            self.ring[slot(self.front)].sort_unstable_by_key(|k| std::cmp::Reverse(order(k)));
        }
        Some(key)
    }
}
